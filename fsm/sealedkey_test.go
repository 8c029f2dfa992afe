package fsm

import (
	"bytes"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sealedSeed is a well-formed sealed seed (the state machine checks only
// its shape; package token makes real ones): the version byte and b.
func sealedSeed(b byte) []byte {
	s := bytes.Repeat([]byte{b}, SealedSeedSize)
	s[0] = SealedSeedVersion
	return s
}

// TestSigningKeyValidateTwoForms: a signing key holds exactly one of a
// 32-byte seed or a sealed seed of 1+12+32+16 bytes, and AddSigningKey
// adds exactly the keys Validate accepts.
func TestSigningKeyValidateTwoForms(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, 32)
	badVersion := sealedSeed(3)
	badVersion[0] = 2
	for _, tc := range []struct {
		name string
		key  SigningKey
		text string // in the error; "" for a valid key
	}{
		{"plaintext seed", SigningKey{ID: "k1", Seed: seed}, ""},
		{"sealed seed", SigningKey{ID: "k1", Sealed: sealedSeed(3)}, ""},
		{"sealed seed and an empty seed", SigningKey{ID: "k1", Seed: []byte{}, Sealed: sealedSeed(3)}, ""},
		{"seed and an empty sealed seed", SigningKey{ID: "k1", Seed: seed, Sealed: []byte{}}, ""},
		{"both forms", SigningKey{ID: "k1", Seed: seed, Sealed: sealedSeed(3)}, "both a seed and a sealed seed"},
		{"neither form", SigningKey{ID: "k1"}, "seed of 0 bytes, not 32"},
		{"short seed", SigningKey{ID: "k1", Seed: seed[:31]}, "seed of 31 bytes, not 32"},
		{"sealed seed without its version byte", SigningKey{ID: "k1", Sealed: sealedSeed(3)[1:]}, "sealed seed of 60 bytes, not 61"},
		{"sealed seed too long", SigningKey{ID: "k1", Sealed: append(sealedSeed(3), 0)}, "sealed seed of 62 bytes, not 61"},
		{"sealed seed of 32 bytes (a seed in the wrong field)", SigningKey{ID: "k1", Sealed: seed}, "sealed seed of 32 bytes"},
		{"sealed seed of an unknown version", SigningKey{ID: "k1", Sealed: badVersion}, "version 2, not 1"},
		{"sealed seed under a bad id", SigningKey{ID: "k 1", Sealed: sealedSeed(3)}, "is not 1..64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.key.Validate()
			switch {
			case tc.text == "" && err != nil:
				t.Fatalf("Validate: %v, want nil", err)
			case tc.text != "" && (!errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.text)):
				t.Fatalf("Validate: %v, want ErrMalformed with %q", err, tc.text)
			}
			r := New().ApplyCommand(1, &AddSigningKey{Key: tc.key})
			if added := r.Status == StatusOK; added != (err == nil) {
				t.Fatalf("AddSigningKey: %s %s, but Validate says %v", r.Status, r.Detail, err)
			}
		})
	}
}

// mixedKeysLedger applies, through the log encoding, a plaintext key and
// then a sealed one.
func mixedKeysLedger(t *testing.T) (*Ledger, [][]byte) {
	t.Helper()
	l := New()
	at := int64(1_900_000_000) * 1e9
	var entries [][]byte
	for i, k := range []SigningKey{
		{ID: "k-plain", Seed: bytes.Repeat([]byte{1}, 32)},
		{ID: "k-sealed", Sealed: sealedSeed(2)},
	} {
		data, err := Encode(at+int64(i)*1e9, &AddSigningKey{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		if r := l.Apply(uint64(i+1), data); r.Status != StatusOK {
			t.Fatalf("add %s: %s %s", k.ID, r.Status, r.Detail)
		}
		entries = append(entries, data)
	}
	return l, entries
}

// TestSealedKeyInTheLog: a sealed key's log entry carries "sealed" and no
// "seed", and the ledger keeps the sealed bytes as they came.
func TestSealedKeyInTheLog(t *testing.T) {
	l, entries := mixedKeysLedger(t)
	if e := string(entries[1]); !strings.Contains(e, `"sealed":"`+base64.StdEncoding.EncodeToString(sealedSeed(2))+`"`) ||
		strings.Contains(e, `"seed"`) {
		t.Fatalf("sealed key's entry = %s", e)
	}
	if e := string(entries[0]); strings.Contains(e, `"sealed"`) || !strings.Contains(e, `"seed":"`) {
		t.Fatalf("plaintext key's entry = %s", e)
	}
	keys := l.SigningKeys()
	if len(keys) != 2 || keys[0].Sealed != nil || len(keys[0].Seed) != 32 ||
		keys[1].Seed != nil || !bytes.Equal(keys[1].Sealed, sealedSeed(2)) {
		t.Fatalf("keys = %+v", keys)
	}
	// Both in one entry is malformed, deterministically, without a panic.
	data, err := Encode(int64(1_900_000_002)*1e9, &AddSigningKey{Key: SigningKey{ID: "k-both", Seed: bytes.Repeat([]byte{1}, 32), Sealed: sealedSeed(3)}})
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Apply(3, data); r.Status != StatusMalformed {
		t.Fatalf("key with both forms: %s, want malformed", r.Status)
	}
}

// TestSnapshotWithSealedKeysRoundTrips: both encodings of a snapshot carry
// each key in its own form, and restore it byte for byte.
func TestSnapshotWithSealedKeysRoundTrips(t *testing.T) {
	l, _ := mixedKeysLedger(t)
	for _, tc := range []struct {
		name  string
		write func(*Ledger, *bytes.Buffer) error
	}{
		{"binary (version 3)", func(l *Ledger, b *bytes.Buffer) error { return l.WriteSnapshot(b) }},
		{"JSON lines (version 2)", func(l *Ledger, b *bytes.Buffer) error { return l.WriteSnapshotJSON(b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var snap bytes.Buffer
			if err := tc.write(l, &snap); err != nil {
				t.Fatal(err)
			}
			header, _, _ := strings.Cut(snap.String(), "\n")
			if !strings.Contains(header, `{"id":"k-sealed","sealed":"`) || strings.Count(header, `"seed"`) != 1 {
				t.Fatalf("header = %s", header)
			}
			restored, err := Restore(bytes.NewReader(snap.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(restored.SigningKeys(), l.SigningKeys()) {
				t.Fatalf("restored keys %+v, want %+v", restored.SigningKeys(), l.SigningKeys())
			}
			var again bytes.Buffer
			if err := tc.write(restored, &again); err != nil || !bytes.Equal(again.Bytes(), snap.Bytes()) {
				t.Fatalf("the restored ledger writes another snapshot (%v)", err)
			}
			if restored.Digest() != l.Digest() {
				t.Fatal("digests differ after the round trip")
			}
		})
	}
}

// TestRestoreRefusesMalformedSealedKeys: a snapshot's sealed keys are held
// to the rule AddSigningKey applies.
func TestRestoreRefusesMalformedSealedKeys(t *testing.T) {
	l, _ := mixedKeysLedger(t)
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(k []SigningKey)
		text   string
	}{
		{"truncated sealed seed", func(k []SigningKey) { k[1].Sealed = k[1].Sealed[:40] }, "sealed seed of 40 bytes"},
		{"sealed seed of another version", func(k []SigningKey) { k[1].Sealed[0] = 9 }, "version 9"},
		{"a seed beside the sealed seed", func(k []SigningKey) { k[1].Seed = bytes.Repeat([]byte{5}, 32) }, "both a seed and a sealed seed"},
		{"a sealed seed beside the seed", func(k []SigningKey) { k[0].Sealed = sealedSeed(4) }, "both a seed and a sealed seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := takeApart(t, snap.Bytes())
			tc.change(p.hdr.Keys)
			_, err := Restore(bytes.NewReader(p.bytes(t)))
			if !errors.Is(err, ErrInvalidSnapshot) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Restore: %v, want ErrInvalidSnapshot with %q", err, tc.text)
			}
		})
	}
}

// earlierSnapshot is a snapshot written by the version before sealed
// seeds: two plaintext keys (seeds of 1s and 2s) added at indexes 1 and 2.
const earlierSnapshot = `{"format":"intentd-ledger","version":3,"index":2,"now":1900000001000000000,"count":0,"keys":[{"id":"k-old-1","seed":"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=","created_at":1900000000000000000},{"id":"k-old-2","seed":"AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=","created_at":1900000001000000000}],"settings":{},"chains":[{"namespace":"_system","first_seq":1,"anchor":"0000000000000000000000000000000000000000000000000000000000000000","last_seq":2,"last_hash":"a00e577a3044298ea42e56e0ad4674db8c9813b0e65005daf8360c8d9054d8f5","dropped":0}],"events":2}
{"ns":"_system","seq":1,"hash":"3c8341a435a92a1b8e07f5cea4264da34452df15d277073059f4dbaaf46aa7b0","event":{"seq":1,"ns":"_system","prev":"0000000000000000000000000000000000000000000000000000000000000000","index":1,"at":1900000000000000000,"op":"key.add","status":"ok","state":"","reason":"signing key k-old-1"}}
{"ns":"_system","seq":2,"hash":"a00e577a3044298ea42e56e0ad4674db8c9813b0e65005daf8360c8d9054d8f5","event":{"seq":2,"ns":"_system","prev":"3c8341a435a92a1b8e07f5cea4264da34452df15d277073059f4dbaaf46aa7b0","index":2,"at":1900000001000000000,"op":"key.add","status":"ok","state":"","reason":"signing key k-old-2"}}
{"sha256":"9578f8ec2c630eef7a8c3f9fa98186e07dfc2f6922af434d642524380abd62eb"}
`

// earlierAddSigningKey is an AddSigningKey log entry of the version before
// sealed seeds.
const earlierAddSigningKey = "\f\x01{\"at\":1900000000000000000,\"key\":{\"id\":\"k-old-1\",\"seed\":\"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\",\"created_at\":0}}"

// TestEarlierSnapshotAndLogRestore: a snapshot and a log entry written
// before sealed seeds existed restore and apply as they did, and a
// ledger of plaintext keys still writes the same bytes (the digest
// replicas compare is unchanged across the upgrade).
func TestEarlierSnapshotAndLogRestore(t *testing.T) {
	l, err := Restore(strings.NewReader(earlierSnapshot))
	if err != nil {
		t.Fatal(err)
	}
	keys := l.SigningKeys()
	if len(keys) != 2 || keys[0].ID != "k-old-1" || !bytes.Equal(keys[0].Seed, bytes.Repeat([]byte{1}, 32)) ||
		keys[1].ID != "k-old-2" || !bytes.Equal(keys[1].Seed, bytes.Repeat([]byte{2}, 32)) || keys[0].Sealed != nil || keys[1].Sealed != nil {
		t.Fatalf("keys = %+v", keys)
	}
	var again bytes.Buffer
	if err := l.WriteSnapshot(&again); err != nil || again.String() != earlierSnapshot {
		t.Fatalf("rewritten snapshot differs from the earlier version's (%v):\n%s", err, again.String())
	}

	fresh := New()
	if r := fresh.Apply(1, []byte(earlierAddSigningKey)); r.Status != StatusOK {
		t.Fatalf("earlier entry: %s %s", r.Status, r.Detail)
	}
	if k := fresh.SigningKeys(); len(k) != 1 || k[0].ID != "k-old-1" || len(k[0].Seed) != 32 || k[0].Sealed != nil {
		t.Fatalf("keys = %+v", k)
	}
}

// A sealed signing key is written only in an encoding every server of the
// cluster decodes as sealed (EncodingBinary2): an older node would read a
// key without its seed, refuse it and diverge from the rest.
func TestSealedKeyNeedsTheNewestEncoding(t *testing.T) {
	k := &AddSigningKey{Key: SigningKey{ID: "k1", Sealed: append([]byte{SealedSeedVersion}, make([]byte, SealedSeedSize-1)...)}}
	for _, enc := range []byte{EncodingJSON, EncodingBinary} {
		if _, err := EncodeAs(enc, 1, k); !errors.Is(err, ErrNeedsNewerEncoding) {
			t.Errorf("encoding %d: %v, want ErrNeedsNewerEncoding", enc, err)
		}
	}
	if _, err := EncodeAs(EncodingBinary2, 1, k); err != nil {
		t.Fatalf("encoding %d: %v", EncodingBinary2, err)
	}
	plain := &AddSigningKey{Key: SigningKey{ID: "k2", Seed: make([]byte, 32)}}
	if _, err := EncodeAs(EncodingJSON, 1, plain); err != nil {
		t.Fatalf("a plaintext key in JSON: %v", err)
	}
}

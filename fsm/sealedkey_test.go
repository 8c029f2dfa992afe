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
func mixedKeysLedger(t *testing.T) (*Machine, [][]byte) {
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

// TestSnapshotWithSealedKeysRoundTrips: a snapshot carries each key in
// its own form and restores it byte for byte, and the JSON dump shows
// each key in its own form too (no plaintext seed of a sealed key).
func TestSnapshotWithSealedKeysRoundTrips(t *testing.T) {
	l, _ := mixedKeysLedger(t)
	for _, tc := range []struct {
		name  string
		write func(*Machine, *bytes.Buffer) error
	}{
		{"snapshot", func(l *Machine, b *bytes.Buffer) error { return l.WriteSnapshot(b) }},
		{"JSON dump", func(l *Machine, b *bytes.Buffer) error { return l.WriteSnapshotJSON(b) }},
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
		})
	}
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(bytes.NewReader(snap.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.SigningKeys(), l.SigningKeys()) {
		t.Fatalf("restored keys %+v, want %+v", restored.SigningKeys(), l.SigningKeys())
	}
	var again bytes.Buffer
	if err := restored.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap.Bytes()) {
		t.Fatalf("the restored ledger writes another snapshot (%v)", err)
	}
	if restored.Digest() != l.Digest() {
		t.Fatal("digests differ after the round trip")
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

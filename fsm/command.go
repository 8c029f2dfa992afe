package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// CommandType is the first byte of every log entry. The high bit marks a
// type that older replicas may skip; any other unknown type stops the
// replica (panics) rather than let replicas silently diverge.
type CommandType byte

// IgnorableFlag marks a command type that replicas which do not know it may
// skip.
const IgnorableFlag CommandType = 0x80

// Command types. Values are part of the log format: never renumber.
const (
	TypeClaim    CommandType = 1
	TypeComplete CommandType = 2
	TypeRenew    CommandType = 3
	TypeCommit   CommandType = 4
	TypeResolve  CommandType = 5
	TypeApprove  CommandType = 6
	TypeReject   CommandType = 7
	TypeExpire   CommandType = 8
	TypePurge    CommandType = 9

	TypePutPolicy     CommandType = 10
	TypeDeletePolicy  CommandType = 11
	TypeAddSigningKey CommandType = 12
	TypeUseToken      CommandType = 13
	TypeSetSettings   CommandType = 14
)

// Errors returned by Decode.
var (
	ErrUnknownCommand   = errors.New("unknown command type")
	ErrIgnorableCommand = errors.New("unknown ignorable command type")
	ErrBadVersion       = errors.New("unsupported command encoding version")
)

// Header is embedded in every command. At is the proposal time in Unix
// nanoseconds, stamped by the leader; the ledger never lets time run
// backwards (it uses the maximum of At and the last time it applied).
type Header struct {
	At int64 `json:"at"`
}

func (h *Header) header() *Header { return h }

// Command is one state machine operation.
type Command interface {
	Type() CommandType
	header() *Header
}

// Claim asks for the right to execute the effect named by the key.
type Claim struct {
	Header
	Namespace string `json:"ns"`
	Key       string `json:"key"`
	Tool      string `json:"tool"`
	Owner     string `json:"owner"`
	// Payload is the canonical (RFC 8785) form of the caller's payload and
	// Fingerprint its fingerprint; both are computed before proposal (see
	// Fingerprint) so the log carries them and replicas need not agree on
	// a canonicalizer.
	Payload     json.RawMessage `json:"payload,omitempty"`
	Fingerprint string          `json:"fp"`
	// Policy names the policy the caller asks for; empty selects one by
	// the tool (see Ledger.policyFor).
	Policy string `json:"policy,omitempty"`
	// LeaseMS is the lease the caller asked for; 0 takes the policy's,
	// else DefaultLeaseMS.
	LeaseMS int64 `json:"lease_ms"`
	// DefaultLeaseMS and DedupeWindowMS are the node's defaults, used
	// where neither the policy nor the default policy sets a value.
	DefaultLeaseMS int64 `json:"default_lease_ms,omitempty"`
	DedupeWindowMS int64 `json:"dedupe_ms"`
	// RequireApproval forces pending_approval whatever the policy says
	// (tests and tools that gate by hand).
	RequireApproval bool `json:"approval,omitempty"`
	// Principal is the API key that claims (its name; empty in
	// development mode). A grant, or the pending intent a claim creates,
	// is bound to it: see Complete.Principal. Encodings before
	// EncodingBinary2 cannot carry it, so their claims are unbound.
	Principal string `json:"principal,omitempty"`
}

// Complete reports the outcome of an effect by its owner.
type Complete struct {
	Header
	Namespace    string          `json:"ns"`
	Key          string          `json:"key"`
	Owner        string          `json:"owner"`
	FencingToken uint64          `json:"fence"`
	Outcome      Outcome         `json:"outcome"`
	Result       json.RawMessage `json:"result,omitempty"`
	// Principal is the API key that reports, and Override whether its
	// roles let it settle grants other keys hold (reconciler, admin). A
	// grant bound to a key (Intent.Principal) takes a report only from
	// that key or one with Override; any other is refused as
	// not_grant_holder. An empty Principal names no key (development
	// mode, or an entry in an encoding before EncodingBinary2, which
	// cannot carry one): it is checked by owner and fencing token only,
	// as it was before grants were bound.
	Principal string `json:"principal,omitempty"`
	Override  bool   `json:"override,omitempty"`
}

// Renew extends the owner's lease.
type Renew struct {
	Header
	Namespace    string `json:"ns"`
	Key          string `json:"key"`
	Owner        string `json:"owner"`
	FencingToken uint64 `json:"fence"`
	LeaseMS      int64  `json:"lease_ms"`
	// Principal and Override are the caller, as in Complete.
	Principal string `json:"principal,omitempty"`
	Override  bool   `json:"override,omitempty"`
}

// Commit acknowledges an executed intent's result (executed → committed).
type Commit struct {
	Header
	Namespace string `json:"ns"`
	Key       string `json:"key"`
	Owner     string `json:"owner"`
	// Principal and Override are the caller, as in Complete.
	Principal string `json:"principal,omitempty"`
	Override  bool   `json:"override,omitempty"`
}

// Resolve settles an in_doubt intent after someone checked the tool's side.
type Resolve struct {
	Header
	Namespace string          `json:"ns"`
	Key       string          `json:"key"`
	Outcome   Outcome         `json:"outcome"`
	Result    json.RawMessage `json:"result,omitempty"`
	Actor     string          `json:"actor"`
	Reason    string          `json:"reason,omitempty"`
}

// Approve records one approval of a pending intent. Fingerprint, when
// set, binds the approval to the payload the approver saw: it is refused
// if the intent's fingerprint differs.
type Approve struct {
	Header
	Namespace   string `json:"ns"`
	Key         string `json:"key"`
	Actor       string `json:"actor"`
	Reason      string `json:"reason,omitempty"`
	Fingerprint string `json:"fp,omitempty"`
}

// Reject rejects a pending intent; one rejection is enough.
type Reject struct {
	Header
	Namespace   string `json:"ns"`
	Key         string `json:"key"`
	Actor       string `json:"actor"`
	Reason      string `json:"reason,omitempty"`
	Fingerprint string `json:"fp,omitempty"`
}

// Expire moves declared intents whose lease has passed to in_doubt. The
// leader proposes it for leases it saw pass; each key is checked again at
// apply time.
type Expire struct {
	Header
	Keys []Ref `json:"keys"`
}

// Purge deletes finished intents whose dedupe window has passed; each key
// is checked again at apply time.
type Purge struct {
	Header
	Keys []Ref `json:"keys"`
}

// Type implements Command.
func (*Claim) Type() CommandType    { return TypeClaim }
func (*Complete) Type() CommandType { return TypeComplete }
func (*Renew) Type() CommandType    { return TypeRenew }
func (*Commit) Type() CommandType   { return TypeCommit }
func (*Resolve) Type() CommandType  { return TypeResolve }
func (*Approve) Type() CommandType  { return TypeApprove }
func (*Reject) Type() CommandType   { return TypeReject }
func (*Expire) Type() CommandType   { return TypeExpire }
func (*Purge) Type() CommandType    { return TypePurge }

func newCommand(t CommandType) Command {
	switch t {
	case TypeClaim:
		return &Claim{}
	case TypeComplete:
		return &Complete{}
	case TypeRenew:
		return &Renew{}
	case TypeCommit:
		return &Commit{}
	case TypeResolve:
		return &Resolve{}
	case TypeApprove:
		return &Approve{}
	case TypeReject:
		return &Reject{}
	case TypeExpire:
		return &Expire{}
	case TypePurge:
		return &Purge{}
	case TypePutPolicy:
		return &PutPolicy{}
	case TypeDeletePolicy:
		return &DeletePolicy{}
	case TypeAddSigningKey:
		return &AddSigningKey{}
	case TypeUseToken:
		return &UseToken{}
	case TypeSetSettings:
		return &SetSettings{}
	}
	return nil
}

// Encode stamps cmd with the time at (Unix nanoseconds) and returns its log
// entry in the newest encoding: type byte, encoding byte (MaxEncoding for
// the types that have a binary body, else EncodingJSON), body. A node must
// not propose what a voter cannot decode: the cluster layer uses EncodeAs
// with the oldest encoding every voter announces.
func Encode(at int64, cmd Command) ([]byte, error) {
	return EncodeAs(MaxEncoding, at, cmd)
}

// EncodeAs is Encode in at most the given encoding: a type without a
// binary encoding, or maxEncoding EncodingJSON, gives a JSON body. The JSON
// body is written without HTML escaping so a canonical (RFC 8785) payload
// or result reaches the state machine byte for byte.
//
// Below EncodingBinary2 the fields that encoding introduced (the caller's
// principal and override, a policy's allow_self_approval) are left out, in
// the JSON body too: a replica of a version before them would ignore them
// in JSON (encoding/json skips unknown fields) and decide differently
// from one that reads them. Left out, every replica reads the same
// command: a claim bound to no key, a report that names none, a policy
// that does not allow self-approval.
func EncodeAs(maxEncoding byte, at int64, cmd Command) ([]byte, error) {
	cmd.header().At = at
	enc := min(maxEncoding, MaxEncoding)
	if enc < EncodingBinary2 {
		if k, ok := cmd.(*AddSigningKey); ok && len(k.Key.Sealed) > 0 {
			// A node of an older version would read the key without its
			// seed, refuse it and diverge from the rest.
			return nil, fmt.Errorf("encode a sealed signing key %s: %w", k.Key.ID, ErrNeedsNewerEncoding)
		}
		cmd = withoutEncoding2Fields(cmd)
	}
	if enc >= EncodingBinary && hasBinary(cmd.Type()) {
		// Raw JSON is checked as the JSON encoder checks it: nothing that
		// is not JSON reaches the log.
		if raw := rawJSONOf(cmd); len(raw) > 0 && !json.Valid(raw) {
			return nil, fmt.Errorf("encode %T: %w", cmd, errNotJSON)
		}
		return appendBinary([]byte{byte(cmd.Type()), enc}, enc, cmd), nil
	}
	var buf bytes.Buffer
	buf.Write([]byte{byte(cmd.Type()), EncodingJSON})
	je := json.NewEncoder(&buf)
	je.SetEscapeHTML(false)
	if err := je.Encode(cmd); err != nil {
		return nil, fmt.Errorf("encode %T: %w", cmd, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// ErrNeedsNewerEncoding refuses to encode a command that the requested
// encoding cannot carry and that cannot drop what it would lose: every
// server must run a version that decodes a newer encoding first.
var ErrNeedsNewerEncoding = errors.New("the command needs a log encoding some server of the cluster does not decode yet")

// withoutEncoding2Fields returns cmd without the fields EncodingBinary2
// introduced: cmd itself when it sets none, else a copy (the caller's
// command is left as it was).
func withoutEncoding2Fields(cmd Command) Command {
	switch c := cmd.(type) {
	case *Claim:
		if c.Principal != "" {
			cp := *c
			cp.Principal = ""
			return &cp
		}
	case *Complete:
		if c.Principal != "" || c.Override {
			cp := *c
			cp.Principal, cp.Override = "", false
			return &cp
		}
	case *Renew:
		if c.Principal != "" || c.Override {
			cp := *c
			cp.Principal, cp.Override = "", false
			return &cp
		}
	case *Commit:
		if c.Principal != "" || c.Override {
			cp := *c
			cp.Principal, cp.Override = "", false
			return &cp
		}
	case *PutPolicy:
		if c.Policy.AllowSelfApproval {
			cp := *c
			cp.Policy.AllowSelfApproval = false
			return &cp
		}
	}
	return cmd
}

// Decode parses a log entry in any encoding this version knows. It never
// panics; Apply decides what an error means for the replica.
func Decode(data []byte) (Command, error) {
	if len(data) < 2 {
		return nil, fmt.Errorf("%w: entry of %d bytes", ErrMalformed, len(data))
	}
	t := CommandType(data[0])
	cmd := newCommand(t)
	if cmd == nil {
		if t&IgnorableFlag != 0 {
			return nil, fmt.Errorf("%w %#x", ErrIgnorableCommand, byte(t))
		}
		return nil, fmt.Errorf("%w %#x", ErrUnknownCommand, byte(t))
	}
	switch {
	case data[1] == EncodingJSON:
		if err := json.Unmarshal(data[2:], cmd); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
	case (data[1] == EncodingBinary || data[1] == EncodingBinary2) && hasBinary(t):
		if err := decodeBinary(data[2:], data[1], cmd); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
	default:
		return nil, fmt.Errorf("%w %d for type %d", ErrBadVersion, data[1], t)
	}
	return cmd, nil
}

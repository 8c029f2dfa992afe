package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// CommandType is the first byte of every log entry; the second is the
// entry's encoding version (EncodingVersion). The high bit of the type
// marks a type that a replica which does not know it may skip; any other
// unknown type stops the replica (panics) rather than let replicas
// silently diverge.
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

	TypePutPolicy      CommandType = 10
	TypeDeletePolicy   CommandType = 11
	TypeAddSigningKey  CommandType = 12
	TypeUseToken       CommandType = 13
	TypeSetSettings    CommandType = 14
	TypeNoteDuplicates CommandType = 15
)

// Errors returned by Decode.
var (
	ErrUnknownCommand   = errors.New("unknown command type")
	ErrIgnorableCommand = errors.New("unknown ignorable command type")
	ErrBadVersion       = errors.New("unsupported command encoding version")
)

// Header is embedded in every command. At is the proposal time in Unix
// nanoseconds, stamped by the leader; the ledger never lets time run
// backwards (it uses the maximum of At and the last time it applied). Its
// json name is part of the JSON bodies (commandcodec.go).
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
	Namespace string
	Key       string
	Tool      string
	Owner     string
	// Payload is the canonical (RFC 8785) form of the caller's payload and
	// Fingerprint its fingerprint; both are computed before proposal (see
	// Fingerprint) so the log carries them and replicas need not agree on
	// a canonicalizer.
	Payload     json.RawMessage
	Fingerprint string
	// Policy is empty: the ledger picks a claim's policy by its tool
	// (Machine.PolicyForTool). Log entries written before that rule could
	// name a policy, and Apply still honours the name so the log replays
	// as it was applied; ledger.Service.Claim never sets it, and a policy
	// a caller names is only checked against the tool's.
	Policy string
	// LeaseMS is the lease the caller asked for; 0 takes the policy's,
	// else DefaultLeaseMS.
	LeaseMS int64
	// DefaultLeaseMS and DedupeWindowMS are the node's defaults, used
	// where neither the policy nor the default policy sets a value.
	DefaultLeaseMS int64
	DedupeWindowMS int64
	// RequireApproval forces pending_approval whatever the policy says
	// (tests and tools that gate by hand).
	RequireApproval bool
	// Principal is the API key that claims (its name; empty in
	// development mode). A grant, or the pending intent a claim creates,
	// is bound to it: see Complete.Principal.
	Principal string
}

// Complete reports the outcome of an effect by its owner.
type Complete struct {
	Header
	Namespace    string
	Key          string
	Owner        string
	FencingToken uint64
	Outcome      Outcome
	Result       json.RawMessage
	// Principal is the API key that reports, and Override whether its
	// roles let it settle grants other keys hold (reconciler, admin). A
	// grant bound to a key (Intent.Principal) takes a report only from
	// that key or one with Override; any other is refused as
	// not_grant_holder. An empty Principal names no key (development
	// mode): it is checked by owner and fencing token only.
	Principal string
	Override  bool
}

// Renew extends the owner's lease.
type Renew struct {
	Header
	Namespace    string
	Key          string
	Owner        string
	FencingToken uint64
	LeaseMS      int64
	// Principal and Override are the caller, as in Complete.
	Principal string
	Override  bool
}

// Commit acknowledges an executed intent's result (executed → committed).
type Commit struct {
	Header
	Namespace string
	Key       string
	Owner     string
	// Principal and Override are the caller, as in Complete.
	Principal string
	Override  bool
}

// Resolve settles an in_doubt intent after someone checked the tool's side.
type Resolve struct {
	Header
	Namespace string
	Key       string
	Outcome   Outcome
	Result    json.RawMessage
	Actor     string
	Reason    string
}

// Approve records one approval of a pending intent. Fingerprint, when
// set, binds the approval to the payload the approver saw: it is refused
// if the intent's fingerprint differs.
type Approve struct {
	Header
	Namespace   string
	Key         string
	Actor       string
	Reason      string
	Fingerprint string
}

// Reject rejects a pending intent; one rejection is enough.
type Reject struct {
	Header
	Namespace   string
	Key         string
	Actor       string
	Reason      string
	Fingerprint string
}

// Expire moves declared intents whose lease has passed to in_doubt. The
// leader proposes it for leases it saw pass; each key is checked again at
// apply time.
type Expire struct {
	Header
	Keys []Ref
}

// Purge deletes finished intents whose dedupe window has passed; each key
// is checked again at apply time.
type Purge struct {
	Header
	Keys []Ref
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
	case TypeNoteDuplicates:
		return &NoteDuplicates{}
	case TypeNoteRefusals:
		return &NoteRefusals{}
	case TypeNoteDivergent:
		return &NoteDivergent{}
	}
	return nil
}

// Encode stamps cmd with the time at (Unix nanoseconds) and returns its log
// entry: the type byte, EncodingVersion and the body (binary for the types
// that have one, JSON for the rest; see commandcodec.go). A raw payload or
// result that is not JSON is refused, so nothing that is not JSON reaches
// the log. The JSON body is written without HTML escaping.
func Encode(at int64, cmd Command) ([]byte, error) {
	cmd.header().At = at
	if hasBinary(cmd.Type()) {
		if raw := rawJSONOf(cmd); len(raw) > 0 && !json.Valid(raw) {
			return nil, fmt.Errorf("encode %T: %w", cmd, errNotJSON)
		}
		return appendBinary([]byte{byte(cmd.Type()), EncodingVersion}, cmd), nil
	}
	var buf bytes.Buffer
	buf.Write([]byte{byte(cmd.Type()), EncodingVersion})
	je := json.NewEncoder(&buf)
	je.SetEscapeHTML(false)
	if err := je.Encode(cmd); err != nil {
		return nil, fmt.Errorf("encode %T: %w", cmd, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Restamp returns entry, a log entry Encode made, stamped with the time at
// instead of the one it carries: a follower encodes the commands its
// clients send and the leader, which alone stamps time, restamps them
// before it appends them. entry is decoded first, so whatever Decode
// refuses (an unknown type, which would stop every replica, another
// version, a malformed body) is refused here and never reaches the log.
// The result is a new slice; entry is not changed.
func Restamp(entry []byte, at int64) ([]byte, error) {
	cmd, err := Decode(entry)
	if err != nil {
		return nil, err
	}
	if !hasBinary(cmd.Type()) {
		return Encode(at, cmd)
	}
	// A binary body starts with the stamp: replace it, keep the rest.
	_, n := binary.Varint(entry[2:]) // Decode read it, so n > 0
	out := make([]byte, 0, len(entry)+binary.MaxVarintLen64)
	out = append(out, entry[:2]...)
	out = binary.AppendVarint(out, at)
	return append(out, entry[2+n:]...), nil
}

// Decode parses a log entry. It never panics; Apply decides what an error
// means for the replica. An entry of an unknown type is ErrUnknownCommand
// (ErrIgnorableCommand with IgnorableFlag, whatever its version byte), one
// of a known type in another version than EncodingVersion is
// ErrBadVersion, and a body that does not decode is ErrMalformed.
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
	if data[1] != EncodingVersion {
		return nil, fmt.Errorf("%w %d for type %d: this version reads %d", ErrBadVersion, data[1], t, EncodingVersion)
	}
	var err error
	if hasBinary(t) {
		err = decodeBinary(data[2:], cmd)
	} else {
		err = json.Unmarshal(data[2:], cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return cmd, nil
}

package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/token"
)

// Service is the ledger's API, independent of transport.
type Service struct {
	r      Replicator
	limits Limits
	// keyMu keeps concurrent first grants from each adding a signing key.
	keyMu sync.Mutex
	// signers caches a token.Signer per signing key id (keys never change
	// under an id; at most fsm.MaxSigningKeys plus rotated-out ones).
	signers sync.Map
	// keys is how seeds are sealed and opened (Config.KEK); never nil.
	keys *keyring
	// faults are the fault suite's seeded bugs (Config.Faults); none in the
	// product build.
	faults faults.Set
	// local answers duplicates from this node's copy
	// (Config.LocalDuplicates); nil when off.
	local *localDuplicates
	// refusals answers in_flight and in_doubt refusals from the leader's
	// state and notes them in batches (refusals.go); never nil.
	refusals *refusals
	// quotas are the namespace quotas (quotas.go); never nil.
	quotas *quotas
	// capacity refuses claims of new keys past a capacity (capacity.go);
	// nil: none.
	capacity *CapacityMonitor

	// waiters are the long-polls (Wait) by key; the replicator feeds them
	// its changes until unsubscribe is called.
	waiters     *waiters
	unsubscribe func()
	closeOnce   sync.Once
}

// Config is how a Service is set up, all of it given to New. The zero
// Config is a service with the default limits, seeds in the clear, the
// default refusal notes, no seeded bug and no local duplicate answers.
type Config struct {
	// Limits bound what callers may send (zero fields take defaults).
	Limits Limits
	// KEK seals the signing keys the service adds (RotateKey, and the
	// first key of the first grant), so the log and snapshots carry no
	// plaintext seed, and opens sealed keys to sign and verify. Nil keeps
	// seeds in the clear, as before KEKs existed; keys sealed by other
	// nodes then cannot be used here (ErrSigningKeySealed).
	KEK *token.KEK
	// Log receives the report, once per key, of a sealed key this node
	// cannot open (nil: slog.Default()).
	Log *slog.Logger
	// Node names this node in the refusal notes' events ("": "leader").
	Node string
	// RefusalNotes configures refusals answered from the leader's state
	// (zero fields take DefaultRefusalNotes').
	RefusalNotes RefusalNotes
	// Faults are the fault suite's seeded bugs the service carries
	// (faults.CheckThenClaim); none in the product build.
	Faults faults.Set
	// LocalDuplicates, when set, turns local duplicate answers on (see
	// LocalDuplicates): New starts the loop that sends their notes, and
	// Close stops it.
	LocalDuplicates *LocalDuplicates
	// Leading tells whether this node leads (nil: always, as for one node
	// and in tests). Namespace quotas
	// are checked, and their claims counted, only where it is true.
	Leading func() bool
	// NamespaceQuotas are the namespaces' quotas in force at start
	// (SetNamespaceQuotas replaces them on a reload).
	NamespaceQuotas NamespaceQuotas
	// Capacity, when set, refuses claims of new keys with ErrLedgerFull
	// while it says the leader is past a capacity (disk, data dir,
	// memory). The caller runs it (CapacityMonitor.Run).
	Capacity *CapacityMonitor
}

// New returns a Service over r set up by cfg. The Service follows r's
// changes (Replicator.SubscribeChanges) until Close. The error is for a
// LocalDuplicates without its node id or leadership check, or for invalid
// NamespaceQuotas; nothing is started then.
func New(r Replicator, cfg Config) (*Service, error) {
	if ld := cfg.LocalDuplicates; ld != nil && (ld.Node == "" || ld.Leading == nil) {
		return nil, errors.New("ledger: local duplicate answers need the node's id and a leadership check")
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	s := &Service{r: r, limits: cfg.Limits.withDefaults(), keys: &keyring{kek: cfg.KEK, log: log},
		refusals: newRefusals(cfg.RefusalNotes, clockOf(r)), faults: cfg.Faults}
	if cfg.Node != "" {
		s.refusals.node = cfg.Node
	}
	s.quotas = newQuotas(clockOf(r))
	s.quotas.leading = cfg.Leading
	s.capacity = cfg.Capacity
	if err := cfg.NamespaceQuotas.Validate(); err != nil {
		return nil, fmt.Errorf("namespace quotas: %w", err)
	}
	s.quotas.set(cfg.NamespaceQuotas)
	s.waiters = newWaiters(s.limits.MaxWaiters, s.limits.MaxWaitersPerKey, s.limits.MaxWaitersPerCaller)
	s.unsubscribe = r.SubscribeChanges(s.waiters)
	if cfg.LocalDuplicates != nil {
		s.answerDuplicatesLocally(*cfg.LocalDuplicates)
	}
	return s, nil
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.limits }

// Caller is who a claim or a report acts for: the API key, and whether
// its roles let it settle grants other keys hold. The state machine binds
// a grant to the key that claims it and refuses a report from another key
// without Override (fsm.StatusNotGrantHolder). The zero Caller names no
// key: development mode (auth off), where grants are bound to none and
// owner and fencing token decide as before.
type Caller struct {
	// Principal is the API key's name ("" with auth off).
	Principal string
	// Override lets the key settle any grant of its namespace (roles
	// reconciler and admin).
	Override bool
}

// ClaimRequest asks for the right to execute an effect.
type ClaimRequest struct {
	Namespace string
	Key       string
	Tool      string
	Owner     string
	// Policy, when set, is what the caller expects the ledger to pick
	// for Tool: a claim is refused (ErrPolicyMismatch) unless it is. The
	// caller never chooses the policy.
	Policy  string
	Payload json.RawMessage
	// Lease is how long the grant holds without a report; zero takes the
	// default.
	Lease time.Duration
	// Principal is the API key that claims ("" with auth off): the grant,
	// or the pending intent, is bound to it.
	Principal string
}

// Claimed is Claim's answer: the state machine's Result and, for a
// grant, its execution token.
type Claimed struct {
	*fsm.Result
	// Token is the grant's execution token (IssueToken) when Status is
	// granted; empty for every other answer (a duplicate, a refusal).
	Token string
}

// TokenNotIssuedError is Claim's error for a claim that was granted but
// whose execution token could not be signed; Claim returns the grant with
// it, without a token. The same claim by the same owner answers the
// grant again, with its token, once the cause is gone.
type TokenNotIssuedError struct {
	// Err is why: ErrSigningKeySealed, or a read or wait that failed.
	Err error
}

func (e *TokenNotIssuedError) Error() string {
	return "the claim was granted but its execution token could not be issued: " + e.Err.Error()
}

// Unwrap returns Err.
func (e *TokenNotIssuedError) Unwrap() error { return e.Err }

// Claim validates and fingerprints the request and proposes it. A grant
// comes back with its execution token (Claimed.Token), signed here so
// that every caller gets it the same way; an error signing it is a
// *TokenNotIssuedError, returned with the grant. Refusals (in_flight,
// divergent, in_doubt ...) and duplicates come back as a Result whose
// Status says so, with no token; the error is otherwise for bad input and
// replication failures.
func (s *Service) Claim(ctx context.Context, req ClaimRequest) (*Claimed, error) {
	r, err := s.claim(ctx, req)
	if r == nil {
		return nil, err
	}
	c := &Claimed{Result: r}
	if err != nil || r.Status != fsm.StatusGranted || r.Intent == nil {
		return c, err
	}
	if c.Token, err = s.IssueToken(ctx, r.Intent); err != nil {
		return c, &TokenNotIssuedError{Err: err}
	}
	return c, nil
}

// claim is Claim without the token.
func (s *Service) claim(ctx context.Context, req ClaimRequest) (*fsm.Result, error) {
	ns, err := s.namespace(req.Namespace)
	if err != nil {
		return nil, err
	}
	if err := s.limits.key(req.Key); err != nil {
		return nil, err
	}
	if err := s.limits.name("tool", req.Tool, true); err != nil {
		return nil, err
	}
	if err := fsm.ValidTool(req.Tool); err != nil {
		return nil, badField(ErrBadRequest, "tool", "%v", err)
	}
	if err := s.limits.name("owner", req.Owner, true); err != nil {
		return nil, err
	}
	if err := s.limits.name("policy", req.Policy, false); err != nil {
		return nil, err
	}
	if err := principal(req.Principal); err != nil {
		return nil, err
	}
	if len(req.Payload) > s.limits.MaxPayloadBytes {
		return nil, badField(ErrTooLarge, "payload", "%d bytes is over the limit of %d", len(req.Payload), s.limits.MaxPayloadBytes)
	}
	var lease time.Duration
	if req.Lease != 0 {
		if lease, err = s.limits.lease(req.Lease); err != nil {
			return nil, err
		}
	}
	canonical, fp, err := fsm.Fingerprint(req.Tool, req.Payload)
	if err != nil {
		return nil, badField(ErrBadRequest, "payload", "%v", err)
	}
	if len(canonical) > s.limits.MaxPayloadBytes {
		return nil, badField(ErrTooLarge, "payload", "canonical form of %d bytes is over the limit of %d", len(canonical), s.limits.MaxPayloadBytes)
	}
	if err := s.checkPolicy(ctx, req.Tool, req.Policy); err != nil {
		return nil, err
	}
	var sawAbsent bool
	if s.faults.Has(faults.CheckThenClaim) {
		// Seeded bug: decide from a local read made before proposing.
		_ = s.r.Read(ctx, Stale, func(l *fsm.Machine) { sawAbsent = l.Get(ns, req.Key) == nil })
	}
	claim := &fsm.Claim{
		Namespace: ns, Key: req.Key, Tool: req.Tool, Owner: req.Owner, Payload: canonical, Fingerprint: fp,
		LeaseMS: lease.Milliseconds(), DefaultLeaseMS: s.limits.DefaultLease.Milliseconds(),
		DedupeWindowMS: s.limits.DedupeWindow.Milliseconds(), Principal: req.Principal,
	}
	if r := s.answerLocally(ctx, claim); r != nil {
		return r, nil
	}
	if err := s.checkCapacity(ctx, claim); err != nil {
		return nil, err
	}
	if err := s.checkQuota(ctx, claim); err != nil {
		return nil, err
	}
	if !sawAbsent {
		if r, err := s.refuseLocally(ctx, claim); r != nil || err != nil {
			return r, err
		}
	}
	r, err := s.propose(ctx, claim)
	if err == nil {
		s.noteRefused(r, claim.Owner)
	}
	if err == nil && sawAbsent && r.Status == fsm.StatusInFlight {
		// Seeded bug: trust the earlier check over the state machine, so
		// two racing claims that both saw the key absent are both told
		// "granted".
		return &fsm.Result{Status: fsm.StatusGranted, Created: true, Intent: r.Intent, Index: r.Index}, nil
	}
	return r, err
}

// CompleteRequest reports an effect's outcome.
type CompleteRequest struct {
	Namespace    string
	Key          string
	Owner        string
	FencingToken uint64
	Outcome      fsm.Outcome
	Result       json.RawMessage
	// Caller is the API key that reports: the grant's own, or one with
	// Override.
	Caller
}

// Complete proposes the owner's report. The state machine refuses it as
// fsm.StatusNotGrantHolder when the grant is bound to another key and the
// caller has no Override.
func (s *Service) Complete(ctx context.Context, req CompleteRequest) (*fsm.Result, error) {
	ns, err := s.holder(req.Namespace, req.Key, req.Owner, req.FencingToken, req.Caller)
	if err != nil {
		return nil, err
	}
	result, err := s.limits.result(req.Outcome, req.Result)
	if err != nil {
		return nil, err
	}
	return s.propose(ctx, &fsm.Complete{Namespace: ns, Key: req.Key, Owner: req.Owner, FencingToken: req.FencingToken,
		Outcome: req.Outcome, Result: result, Principal: req.Principal, Override: req.Override})
}

// RenewRequest extends a lease.
type RenewRequest struct {
	Namespace    string
	Key          string
	Owner        string
	FencingToken uint64
	Lease        time.Duration
	// Caller is the API key that renews, as in CompleteRequest.
	Caller
}

// Renew proposes a lease extension, bound like Complete.
func (s *Service) Renew(ctx context.Context, req RenewRequest) (*fsm.Result, error) {
	ns, err := s.holder(req.Namespace, req.Key, req.Owner, req.FencingToken, req.Caller)
	if err != nil {
		return nil, err
	}
	lease, err := s.limits.lease(req.Lease)
	if err != nil {
		return nil, err
	}
	return s.propose(ctx, &fsm.Renew{Namespace: ns, Key: req.Key, Owner: req.Owner, FencingToken: req.FencingToken,
		LeaseMS: lease.Milliseconds(), Principal: req.Principal, Override: req.Override})
}

// CommitRequest acknowledges an executed intent's result.
type CommitRequest struct {
	Namespace string
	Key       string
	Owner     string
	// Caller is the API key that commits, as in CompleteRequest.
	Caller
}

// Commit proposes the acknowledgement of an executed intent, bound like
// Complete.
func (s *Service) Commit(ctx context.Context, req CommitRequest) (*fsm.Result, error) {
	ns, err := s.keyAndNamespace(req.Namespace, req.Key)
	if err != nil {
		return nil, err
	}
	if err := s.limits.name("owner", req.Owner, true); err != nil {
		return nil, err
	}
	if err := principal(req.Principal); err != nil {
		return nil, err
	}
	return s.propose(ctx, &fsm.Commit{Namespace: ns, Key: req.Key, Owner: req.Owner, Principal: req.Principal,
		Override: req.Override})
}

// ResolveRequest settles an in_doubt intent.
type ResolveRequest struct {
	Namespace string
	Key       string
	Outcome   fsm.Outcome
	Result    json.RawMessage
	Actor     string
	Reason    string
}

// Resolve proposes an operator's or reconciler's verdict.
func (s *Service) Resolve(ctx context.Context, req ResolveRequest) (*fsm.Result, error) {
	ns, err := s.keyAndNamespace(req.Namespace, req.Key)
	if err != nil {
		return nil, err
	}
	if err := s.actor(req.Actor, req.Reason); err != nil {
		return nil, err
	}
	result, err := s.limits.result(req.Outcome, req.Result)
	if err != nil {
		return nil, err
	}
	return s.propose(ctx, &fsm.Resolve{Namespace: ns, Key: req.Key, Outcome: req.Outcome, Result: result,
		Actor: req.Actor, Reason: req.Reason})
}

// Get reads one intent; fsm.ErrNotFound when there is none.
func (s *Service) Get(ctx context.Context, namespace, key string, c Consistency) (*fsm.Intent, error) {
	ns, err := s.keyAndNamespace(namespace, key)
	if err != nil {
		return nil, err
	}
	var in *fsm.Intent
	if err := s.r.Read(ctx, c, func(l *fsm.Machine) { in = l.Get(ns, key) }); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, fmt.Errorf("%w: %q", fsm.ErrNotFound, key)
	}
	return in, nil
}

// ListRequest selects a page of intents.
type ListRequest struct {
	Namespace string
	Prefix    string
	State     fsm.State
	Cursor    string
	Limit     int
}

// List reads a page of intents in key order and the cursor of the next
// page ("" at the end).
func (s *Service) List(ctx context.Context, req ListRequest, c Consistency) ([]*fsm.Intent, string, error) {
	ns, err := s.namespace(req.Namespace)
	if err != nil {
		return nil, "", err
	}
	if req.State != "" && !req.State.Valid() {
		return nil, "", badField(ErrUnprocessable, "state", "unknown state %q", req.State)
	}
	if len(req.Prefix) > s.limits.MaxKeyBytes || len(req.Cursor) > s.limits.MaxKeyBytes {
		return nil, "", badField(ErrBadRequest, "prefix", "prefix and cursor are at most %d bytes", s.limits.MaxKeyBytes)
	}
	switch {
	case req.Limit < 0:
		return nil, "", badField(ErrUnprocessable, "limit", "must not be negative")
	case req.Limit == 0:
		req.Limit = 100
	case req.Limit > s.limits.MaxListLimit:
		req.Limit = s.limits.MaxListLimit
	}
	var page []*fsm.Intent
	var next string
	err = s.r.Read(ctx, c, func(l *fsm.Machine) {
		page, next = l.List(fsm.ListOptions{Namespace: ns, Prefix: req.Prefix, State: req.State, After: req.Cursor, Limit: req.Limit})
	})
	return page, next, err
}

func (s *Service) propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	r, err := s.r.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if r.Status == fsm.StatusMalformed {
		// The service validated the command, so the state machine refusing
		// it is a bug in this node, not bad input.
		return nil, fmt.Errorf("state machine refused a validated command: %s", r.Detail)
	}
	return r, nil
}

// namespace is the namespace a call acts in: ns, which must be valid
// (namespace.Valid), or namespace.Default when ns is empty.
func (s *Service) namespace(ns string) (string, error) {
	switch {
	case ns == "":
		return namespace.Default, nil
	case len(ns) > namespace.MaxBytes:
		return "", badField(ErrBadRequest, "namespace", "%d bytes is over the limit of %d", len(ns), namespace.MaxBytes)
	case !namespace.Valid(ns):
		return "", badField(ErrBadRequest, "namespace", "%q must match [a-z0-9][a-z0-9_-]{0,62}", ns)
	}
	return ns, nil
}

func (s *Service) keyAndNamespace(ns, key string) (string, error) {
	if err := s.limits.key(key); err != nil {
		return "", err
	}
	return s.namespace(ns)
}

// holder validates the namespace, key, owner, fencing token and caller
// of a call only the lease holder (or a key that may settle any grant)
// may make.
func (s *Service) holder(namespace, key, owner string, fencingToken uint64, c Caller) (string, error) {
	ns, err := s.keyAndNamespace(namespace, key)
	if err != nil {
		return "", err
	}
	if err := s.limits.name("owner", owner, true); err != nil {
		return "", err
	}
	if fencingToken == 0 {
		return "", badField(ErrBadRequest, "fencing_token", "is required")
	}
	if err := principal(c.Principal); err != nil {
		return "", err
	}
	return ns, nil
}

// principal checks a caller's principal as the state machine will: at
// most fsm.MaxPrincipalBytes of UTF-8 (API key names are far shorter).
func principal(p string) error {
	if len(p) > fsm.MaxPrincipalBytes || !utf8.ValidString(p) {
		return badField(ErrBadRequest, "principal", "the API key's name is not 0..%d bytes of UTF-8", fsm.MaxPrincipalBytes)
	}
	return nil
}

func (s *Service) actor(actor, reason string) error {
	if err := s.limits.name("actor", actor, true); err != nil {
		return err
	}
	if len(reason) > s.limits.MaxReasonBytes {
		return badField(ErrTooLarge, "reason", "%d bytes is over the limit of %d", len(reason), s.limits.MaxReasonBytes)
	}
	return nil
}

// Package idemproxy is an HTTP reverse proxy that gives any upstream HTTP API
// the semantics of the IETF Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header), with an intentd cluster as
// the replicated store of keys, request fingerprints and recorded
// responses.
//
// A request with an Idempotency-Key on a route that uses keys is claimed in
// the ledger under a key derived from the route's scope and the header
// (LedgerKey), with a payload that describes the request (BuildPayload),
// so the ledger's own fingerprint is the request's fingerprint. Granted,
// the request is forwarded to the upstream with the grant's fencing and
// execution tokens, the lease is renewed while the upstream works, and the
// upstream's answer is streamed to the client and recorded as the intent's
// result (EncodeRecord). A retry gets the recorded answer replayed byte for
// byte, a concurrent one 409 in-flight, one with another request under the
// same key 422 fingerprint-mismatch, and one whose first attempt ended
// without an answer 409 in-doubt until someone resolves the intent.
//
// The pure decisions (key parsing, route matching, payloads, records,
// problem documents) are separate from the I/O (Handler, the ledger calls
// and the upstream exchange), so each is tested on its own. The proxy
// keeps no state of its own: any number of proxies may stand in front of
// one upstream and one ledger. docs/proxy.md is the user's guide.
package idemproxy

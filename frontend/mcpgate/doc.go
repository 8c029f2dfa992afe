// Package mcpgate is an MCP (Model Context Protocol) gateway that puts an
// intentd cluster in front of the tools of one or more MCP servers, so a
// tools/call runs at most once per logical call whatever the host does:
// re-issue it after a broken stream (with a new JSON-RPC id), dispatch it
// twice, or re-run a step when a framework resumes.
//
// The gate is an MCP server to the host (downstream) and an MCP client of
// each upstream server. It lists the upstreams' tools under its own names
// (naming.go: DownstreamName, LedgerToolName), decides per tool whether calls are gated, passed through or
// blocked (Classify), and for a gated call finds the call's idempotency
// key (ResolveKey: an explicit key in _meta, a host call id, or a key
// derived from the arguments inside a time window), claims it in the
// ledger with a payload whose fingerprint is the call's (BuildPayload),
// and acts on the ledger's answer: granted runs the upstream call with the
// grant's fencing and execution tokens in _meta, renews the lease while it
// runs and records the upstream's CallToolResult as the intent's result
// (EncodeRecord); duplicate replays the recorded result; in_flight waits
// for the first call; divergent is a JSON-RPC invalid-params error;
// in_doubt and pending_approval are answers that tell the agent what to
// do.
//
// Hosts get the same protocol versions on every transport
// (ProtocolVersions); their handshake is answered at once, and tools/list
// and tools/call wait for the upstreams' first connection attempts up to
// Config.StartTimeout (Launch).
//
// The gate keeps no state of its own: a restarted gate answers a retried
// call from the ledger, and any number of gates may share one ledger.
// docs/mcp.md is the user's guide.
package mcpgate

package main

// defaultAddr is used when neither --addr nor INTENTCTL_ADDR is set.
const defaultAddr = "http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103,http://127.0.0.1:8100"

const usageText = `intentctl: the intent ledger's command line client

Usage:
  intentctl [global flags] COMMAND [ARGS] [flags]

Commands:
  claim KEY --tool T --payload JSON|@file [--owner O] [--lease 30s] [--policy P]
        ask for the right to execute the effect named by KEY; prints the grant
        (fencing token, execution token) or the recorded outcome (duplicate).
        The owner defaults to a fresh host/pid/random name: keep it to complete.
  complete KEY --owner O --token N --outcome executed|failed [--result JSON|@file]
        report the effect's outcome as the lease holder
  renew KEY --owner O --token N --lease D
        extend the holder's lease while the effect runs
  commit KEY --owner O
        acknowledge an executed intent's result
  resolve KEY --outcome executed|failed --actor A --reason R [--result JSON|@file]
        settle an in_doubt intent after checking the tool's side
  approve KEY --actor A [--reason R] [--fingerprint FP]
  reject KEY --actor A [--reason R] [--fingerprint FP]
        decide a pending intent. --fingerprint binds the decision to the
        payload you reviewed: a different payload is refused (exit 4). With
        --api-key the server takes the actor from the key and --actor is
        optional (likewise for resolve)
  approvals [--limit N] [--cursor C]
        the intents waiting for approval: key, tool, approvals n/N,
        fingerprint (short; "get KEY" shows it whole), creation time
  wait KEY [--after-version V] [--wait 30s]
        long-poll: print the intent as soon as its version is above V (it
        changed, or appeared), or after --wait (at most 60s) as it is
  get KEY [--stale]
        read one intent (linearizable; --stale reads the answering node)
  list [--state S] [--prefix P] [--limit N] [--cursor C] [--stale]
        list intents in key order, a page at a time
  audit KEY
        every recorded attempt on KEY ("audit -- verify" for a key named verify)
  audit verify FILE|-
        an auditor's offline check of a JSON-lines export (audit-log export,
        GET /v1/audit?format=jsonl, the web console's Export button) from a
        file or standard input: the hash chain from the anchor through the
        head; needs no access to the cluster; exit 12 and the first break
        (its seq) if it does not verify
  policy put NAME [--tools 'payments.*,refunds.*'] [--priority N]
        [--dedupe-window 24h] [--lease 30s] [--token-ttl 15m]
        [--require-approval] [--approvals N] [--approvers a,b,c] [--allow-self-approval] [--blocked]
        [--max-payload-bytes N] [--expect-version V]
  policy put NAME --file policy.json [--expect-version V]
        create or replace (whole) the policy NAME (admin); --approvals and
        --approvers imply --require-approval; --expect-version makes it a
        compare-and-set (exit 9 if the policy changed meanwhile)
  policy get NAME
  policy list
        the policies: the default first, then in matching order
  policy delete NAME
  token verify TOKEN [--payload JSON|@file] [--tool NAME]
        the tool side's check of an execution token (role tool): signed,
        unexpired, bound to the payload and the current grant, unused. A
        valid token is spent: a second verify fails (exit 11)
  keys
        the execution-token signing keys (JWKS; --output json prints it raw)
  keys rotate [--force]
        sign new execution tokens with a new key (admin). The cluster keeps
        4 keys: a rotation that would drop the oldest while tokens it signed
        may still be live is refused (exit 9, saying until when); --force
        drops it anyway (its tokens stop verifying at once)
  audit-log [--since N] [--limit N] [--namespace NS]
        a page of the namespace's hash-chained audit log (--output json is
        compact: each event's bytes are the ones its hash covers)
  audit-log export [--since N] [--namespace NS] > FILE.jsonl
        the whole log as JSON lines: {"head":...}, then one event per line,
        up to the head read first (--since N: a partial export, its first
        line also holds "since")
  audit-log verify [--file FILE.jsonl] [--since N] [--namespace NS]
        recompute the hash chain, live or from an export; exit 12 and the
        first break (its seq) if it does not verify
  settings
  settings set --audit-retention N
        cluster-wide settings (set: admin); retention is how many audit
        events each namespace keeps (0: the default)
  namespace usage [NS]
        what a namespace holds (intents by state, bytes) and its quota
        (intentd --namespace-quotas); NS defaults to the API key's own
        namespace, another one needs admin
  apikey new --name N [--namespace NS] --roles agent,approver [--tools P,...] [--key-prefixes P,...] [--env]
        make an API key (offline): prints the plaintext key once, and the
        entry for the server's keys file (--env: the INTENTD_API_KEYS form
        name:namespace:role+role:sha256 instead). Roles: agent, tool,
        approver, reconciler (settles any grant of its namespace, and
        resolves: for the process that reconciles stuck intents), reader,
        admin. A running intentd reloads its keys file on SIGHUP and when
        the file changes: add a key, move callers to it, remove the old one
  kek new --out FILE
        make a key-encryption key (offline) into FILE, mode 0600, never
        replacing one: give every node the same one (intentd --kek-file
        FILE) to seal execution-token signing seeds in the log and snapshots
  cluster
        the cluster's nodes, roles, leader, term, commit and applied index
  peer remove ID
        remove server ID from the cluster (admin; a dead or decommissioned
        node); refused for the leader or without a live majority left;
        wipe the node's data directory before it rejoins
  leader transfer [--to ID]
        hand leadership to voter ID, or to the most up-to-date voter
        (admin; rolling restarts: leader last)
  health
        liveness and readiness of every address
  snapshot save FILE
        stream a consistent snapshot of the whole ledger into FILE (verified
        against its SHA-256 trailer before FILE is written)
  snapshot restore FILE [--force]
        replace the ledger of a fresh cluster with FILE (--force: also a
        ledger that holds intents, destroying them)
  snapshot dump FILE [--out OUT]
        verify FILE and write it as JSON lines (one intent per line, for jq;
        a view: restore refuses it)
  certs [--dir certs] [--nodes n1,n2,n3] [--hosts h,...] [--cluster NAME] [--validity D]
        write a development node CA and client CA, node and client
        certificates; node certificates carry the identity
        intentd://NAME/server/ID (NAME: intentd --cluster-name, default local)
  certs node --id ID [--ca-dir certs] [--cluster NAME] [--hosts h,...] [--out DIR] [--validity D]
        sign a certificate for a new or replacement node, or a rotated
        one, with the node CA in --ca-dir (ca.pem, ca-key.pem); writes
        DIR/ID.pem and DIR/ID-key.pem (DIR: --ca-dir by default) and never
        replaces a file: rotate into another --out, then move the files
  certs client --name N [--ca-dir certs] [--out DIR] [--validity D]
        sign a client certificate (no node identity) with the client CA in
        --ca-dir (client-ca.pem, client-ca-key.pem)
  help
        this text

Global flags (before or after the command):
  --addr LIST      comma separated node addresses (env INTENTCTL_ADDR;
                   default ` + defaultAddr + `)
  --output FORMAT  table or json (default table); json prints the API's JSON
  --timeout D      give up after D (default 10s)
  --retries N      retries of a call the cluster could not answer (default 4)
  --ca FILE        PEM CA that signs the nodes' HTTPS certificates (env INTENTCTL_CA)
  --cert, --key    PEM client certificate and key, for nodes that require one
                   (env INTENTCTL_CERT, INTENTCTL_KEY)
  --api-key KEY    API key for clusters that run with --auth=required
                   (env INTENTCTL_API_KEY; prefer the environment: a flag
                   shows in the process list)

Exit codes:
  0  success: granted, duplicate, ok, pending_approval
  1  other error
  2  usage error or bad input (HTTP 400, 413, 422 except divergent)
  3  in_flight: another owner holds the lease; do not execute
  4  divergent: the payload differs from the recorded one
  5  in_doubt: the lease passed without a report; resolve it
  6  fenced: stale owner or fencing token
  7  not found
  8  unavailable or outcome unknown (HTTP 503, network error, timeout):
     retry the same command
  9  rejected, blocked by policy, or invalid in the intent's (or the
     policy's) state, or the namespace holds its quota of intents
  10 not authorized: no or wrong API key (401), or its roles or namespace
     do not allow the call (403), or the node refused the client's TLS
     certificate (none, or not from its client CA)
  11 token refused: the execution token was already used, expired, or is
     not valid (malformed, forged, unknown key, other payload or grant);
     do not act
  12 audit chain broken: the audit log's hash chain does not verify
`

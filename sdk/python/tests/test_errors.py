"""Problem documents map to the exception classes as client/errors.go maps
codes to sentinels."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import intentd  # noqa: E402
from intentd.errors import maybe_applied, parse_problem, problem_retryable, retryable  # noqa: E402

# client/errors.go's sentinelCodes, as Python classes.
GO_TABLE = {
    intentd.InFlight: ["in_flight"],
    intentd.InDoubt: ["in_doubt"],
    intentd.Divergent: ["divergent"],
    intentd.Fenced: ["fenced"],
    intentd.Rejected: ["rejected"],
    intentd.PendingApproval: ["pending_approval"],
    intentd.NotFound: ["not_found", "policy_not_found"],
    intentd.InvalidState: ["invalid_state", "not_pending_approval", "already_approved", "version_mismatch"],
    intentd.BadRequest: ["bad_request", "too_large", "unprocessable", "unknown_policy"],
    intentd.Blocked: ["blocked"],
    intentd.TokenUsed: ["token_used"],
    intentd.TokenExpired: ["token_expired"],
    # token_wrong_tool and token_tool_forbidden: as client.VerifyToken's
    # errors match them (ErrTokenWrongTool is also ErrTokenInvalid;
    # ErrTokenToolForbidden also ErrUnauthorized).
    intentd.TokenInvalid: ["token_invalid", "token_mismatch", "token_wrong_tool"],
    intentd.TokenWrongTool: ["token_wrong_tool"],
    intentd.Unauthorized: ["unauthenticated", "forbidden", "not_an_approver", "not_grant_holder", "self_approval",
                           "token_tool_forbidden"],
    intentd.TokenToolForbidden: ["token_tool_forbidden"],
    intentd.NotGrantHolder: ["not_grant_holder"],
    intentd.SelfApproval: ["self_approval"],
    intentd.OutcomeUnknown: ["outcome_unknown"],
    intentd.NoLeader: ["no_leader", "not_leader"],
    intentd.Unavailable: ["unavailable", "shutting_down", "not_ready", "no_leader", "not_leader"],
    intentd.RateLimited: ["rate_limited", "namespace_rate_limited"],
    intentd.NamespaceFull: ["namespace_full"],
    intentd.LedgerFull: ["ledger_full"],
    intentd.BadSnapshot: ["bad_snapshot"],
    intentd.NotEmpty: ["not_empty"],
}


def doc(status, code, **kw):
    d = {"type": "t#" + code, "title": "T", "status": status, "code": code, "detail": "d"}
    d.update(kw)
    return json.dumps(d).encode()


class ProblemMapping(unittest.TestCase):
    def test_every_go_code_maps_to_its_class(self):
        for cls, codes in GO_TABLE.items():
            for code in codes:
                with self.subTest(code=code):
                    p = parse_problem(409, {}, doc(409, code))
                    self.assertIsInstance(p, cls)
                    self.assertIsInstance(p, intentd.Problem)
                    self.assertIsInstance(p, intentd.IntentdError)
                    self.assertEqual(p.code, code)

    def test_no_class_matches_codes_go_does_not_match(self):
        for cls, codes in GO_TABLE.items():
            for other in {c for cs in GO_TABLE.values() for c in cs} - set(codes):
                p = parse_problem(409, {}, doc(409, other))
                if isinstance(p, cls):
                    # Only the documented refinements (NoLeader is an Unavailable).
                    self.assertEqual((cls, type(p)), (intentd.Unavailable, intentd.NoLeader), other)

    def test_unknown_codes_are_plain_problems(self):
        p = parse_problem(429, {}, doc(429, "too_many_waiters"))
        self.assertIs(type(p), intentd.Problem)
        self.assertTrue(problem_retryable(p))

    def test_fields(self):
        intent = {"key": "k", "state": "declared", "owner": "o", "fencing_token": 4, "version": 9,
                  "lease_deadline": "2026-11-29T22:36:52.561493774Z", "payload": {"a": 1}}
        p = parse_problem(422, {}, doc(422, "divergent", intent=intent, fingerprint="f1", request_fingerprint="f2",
                                       field="payload"))
        self.assertEqual((p.status, p.title, p.detail, p.type, p.field), (422, "T", "d", "t#divergent", "payload"))
        self.assertEqual((p.fingerprint, p.request_fingerprint), ("f1", "f2"))
        self.assertEqual((p.intent.key, p.intent.owner, p.intent.fencing_token, p.intent.version), ("k", "o", 4, 9))
        self.assertEqual(p.intent.lease_deadline.microsecond, 561493)
        self.assertEqual(p.intent.payload, {"a": 1})
        self.assertIn("422 divergent", str(p))

    def test_retry_after(self):
        p = parse_problem(409, {"Retry-After": "30"}, doc(409, "in_flight", retry_after_ms=29925))
        self.assertAlmostEqual(p.retry_after, 29.925)
        p = parse_problem(503, {"retry-after": "2"}, doc(503, "no_leader"))
        self.assertEqual(p.retry_after, 2.0)
        p = parse_problem(503, {}, doc(503, "no_leader"))
        self.assertIsNone(p.retry_after)

    def test_answers_without_a_document_are_named_by_status(self):
        for status, cls, code in [(502, intentd.Unavailable, "unavailable"), (429, intentd.RateLimited, "rate_limited"),
                                  (401, intentd.Unauthorized, "unauthenticated"), (413, intentd.BadRequest, "too_large"),
                                  (418, intentd.Problem, "")]:
            p = parse_problem(status, {}, b"<html>proxy error</html>")
            self.assertIsInstance(p, cls)
            self.assertEqual((p.code, p.detail), (code, "<html>proxy error</html>"))

    def test_retry_classification(self):
        self.assertTrue(problem_retryable(parse_problem(503, {}, doc(503, "outcome_unknown"))))
        self.assertFalse(problem_retryable(parse_problem(503, {}, doc(503, "weird"))))
        self.assertFalse(problem_retryable(parse_problem(409, {}, doc(409, "in_flight"))))
        self.assertTrue(maybe_applied(parse_problem(503, {}, doc(503, "outcome_unknown"))))
        self.assertTrue(maybe_applied(parse_problem(500, {}, doc(500, "internal"))))
        self.assertFalse(maybe_applied(parse_problem(503, {}, doc(503, "no_leader"))))
        self.assertTrue(retryable(parse_problem(500, {}, doc(500, "internal"))))
        self.assertTrue(retryable(parse_problem(429, {}, doc(429, "rate_limited"))))
        self.assertFalse(retryable(parse_problem(422, {}, doc(422, "divergent"))))

    def test_namespace_quota_classification(self):
        # (status, code, retried by the transport, retried by do(), may have been applied)
        cases = [
            (429, "namespace_rate_limited", True, True, False),
            (429, "rate_limited", True, True, False),
            (507, "namespace_full", False, False, False),
            (507, "ledger_full", False, False, False),
            (500, "internal", False, True, True),  # control: a 5xx do() retries
        ]
        for status, code, transport, do, applied in cases:
            with self.subTest(code=code):
                p = parse_problem(status, {"Retry-After": "1"}, doc(status, code, retry_after_ms=250))
                self.assertEqual((problem_retryable(p), retryable(p), maybe_applied(p)), (transport, do, applied))
                self.assertEqual(p.retry_after, 0.25)

    def test_problem_dict_round_trip(self):
        p = parse_problem(409, {}, doc(409, "fenced", intent={"key": "k"}))
        d = p.to_dict()
        self.assertEqual((d["code"], d["status"], d["intent"]), ("fenced", 409, {"key": "k"}))


if __name__ == "__main__":
    unittest.main()

package httpapi

import "github.com/intentledger/intentd/internal/jsonenc"

// jsonAppender is a response body that writes its own JSON, byte for byte
// what encoding/json writes for it without HTML escaping (pinned by
// TestViewJSONMatchesEncodingJSON). The answers about one intent are the
// API's hot path, and reflection was most of their encoding cost. Payloads
// and results are written as stored: the state machine stores them
// compact, which is what encoding/json would make of them.
type jsonAppender interface {
	appendJSON(dst []byte) []byte
}

func (v *intentView) appendJSON(dst []byte) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	o := jsonenc.Object{B: dst}
	o.String("key", v.Key)
	o.String("namespace", v.Namespace)
	o.String("tool", v.Tool)
	o.String("state", string(v.State))
	if v.Owner != "" {
		o.String("owner", v.Owner)
	}
	o.Uint("fencing_token", v.FencingToken)
	o.Uint("generation", v.Generation)
	o.String("fingerprint", v.Fingerprint)
	if len(v.Payload) > 0 {
		o.Raw("payload", v.Payload)
	}
	if len(v.Result) > 0 {
		o.Raw("result", v.Result)
	}
	if v.Policy != "" {
		o.String("policy", v.Policy)
	}
	if v.LeaseMS != 0 {
		o.Int("lease_ms", v.LeaseMS)
	}
	if v.LeaseDeadline != "" {
		o.String("lease_deadline", v.LeaseDeadline)
	}
	o.String("created_at", v.CreatedAt)
	o.String("updated_at", v.UpdatedAt)
	o.Uint("duplicates", v.Duplicates)
	o.Uint("divergent", v.Divergent)
	o.Uint("version", v.Version)
	if v.PolicyVersion != 0 {
		o.Uint("policy_version", v.PolicyVersion)
	}
	if v.ApprovalsRequired != 0 {
		o.Int("approvals_required", int64(v.ApprovalsRequired))
	}
	if len(v.Approvals) > 0 {
		o.Key("approvals")
		o.B = append(o.B, '[')
		for i, a := range v.Approvals {
			if i > 0 {
				o.B = append(o.B, ',')
			}
			ao := jsonenc.Object{B: o.B}
			ao.String("actor", a.Actor)
			ao.String("at", a.At)
			if a.Reason != "" {
				ao.String("reason", a.Reason)
			}
			o.B = ao.End()
		}
		o.B = append(o.B, ']')
	}
	if v.TokenUsed {
		o.Bool("token_used", true)
	}
	if v.Principal != "" {
		o.String("principal", v.Principal)
	}
	return o.End()
}

func (r claimResponse) appendJSON(dst []byte) []byte {
	o := jsonenc.Object{B: dst}
	o.String("status", string(r.Status))
	if r.FencingToken != 0 {
		o.Uint("fencing_token", r.FencingToken)
	}
	if r.ExecutionToken != "" {
		o.String("execution_token", r.ExecutionToken)
	}
	o.Key("intent")
	o.B = r.Intent.appendJSON(o.B)
	return o.End()
}

func (r intentResponse) appendJSON(dst []byte) []byte {
	o := jsonenc.Object{B: dst}
	o.String("status", string(r.Status))
	o.Key("intent")
	o.B = r.Intent.appendJSON(o.B)
	return o.End()
}

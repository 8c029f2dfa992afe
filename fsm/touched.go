package fsm

// Touched appends to dst the intents cmd may change when it is applied and
// returns the result. A command names the intents it can change: the one
// key of a per-request command (a lazy lease expiry on apply changes that
// same key), every key of a sweep (Expire, Purge). The answer is a
// superset: a sweep checks each key again at apply time and may leave some
// as they were, and a refusal may write nothing. Policies, signing keys and
// settings change no intent and touch nothing.
//
// all is true for a command Touched does not know: the caller must treat it
// as possibly changing every intent. The answer depends on the command
// alone, so every replica computes the same one.
func Touched(dst []Ref, cmd Command) (refs []Ref, all bool) {
	switch c := cmd.(type) {
	case *Claim:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *Complete:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *Renew:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *Commit:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *Resolve:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *Approve:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *Reject:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *UseToken:
		return append(dst, Ref{Namespace: c.Namespace, Key: c.Key}), false
	case *NoteDuplicates:
		for _, n := range c.Notes {
			dst = append(dst, Ref{Namespace: n.Namespace, Key: n.Key})
		}
		return dst, false
	case *NoteRefusals:
		for _, n := range c.Notes {
			dst = append(dst, Ref{Namespace: n.Namespace, Key: n.Key})
		}
		return dst, false
	case *NoteDivergent:
		for _, n := range c.Notes {
			dst = append(dst, Ref{Namespace: n.Namespace, Key: n.Key})
		}
		return dst, false
	case *Expire:
		return append(dst, c.Keys...), false
	case *Purge:
		return append(dst, c.Keys...), false
	case *PutPolicy, *DeletePolicy, *AddSigningKey, *SetSettings:
		return dst, false
	}
	return dst, true
}

// ApplyTouched applies one log entry exactly like Apply and also appends to
// dst the intents the entry may have changed (see Touched). An entry that
// does not decode (ignored or malformed) changes no intent; one that stops
// the replica panics as in Apply. It decodes the entry once.
func (l *Machine) ApplyTouched(index uint64, data []byte, dst []Ref) (r *Result, refs []Ref, all bool) {
	cmd, err := Decode(data)
	if err != nil {
		// Apply decides what the error means (refuse, ignore or panic).
		return l.Apply(index, data), dst, false
	}
	refs, all = Touched(dst, cmd)
	return l.ApplyCommand(index, cmd), refs, all
}

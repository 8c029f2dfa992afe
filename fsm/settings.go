package fsm

import "fmt"

// SetSettings replaces the cluster-wide settings.
type SetSettings struct {
	Header
	Settings Settings `json:"settings"`
	Actor    string   `json:"actor,omitempty"`
}

// Type implements Command.
func (*SetSettings) Type() CommandType { return TypeSetSettings }

// Settings are cluster-wide knobs that must be the same on every replica,
// so they are replicated like everything else.
type Settings struct {
	// AuditRetention is how many events each namespace's audit log keeps
	// (0: DefaultAuditRetention).
	AuditRetention int `json:"audit_retention,omitempty"`
}

// MaxAuditRetention bounds Settings.AuditRetention.
const MaxAuditRetention = 10_000_000

func (s Settings) auditRetention() int {
	if s.AuditRetention <= 0 {
		return DefaultAuditRetention
	}
	return s.AuditRetention
}

// Validate checks settings an operator submits.
func (s Settings) Validate() error {
	if s.AuditRetention < 0 || s.AuditRetention > MaxAuditRetention {
		return fmt.Errorf("%w: audit_retention %d is outside 0..%d", ErrMalformed, s.AuditRetention, MaxAuditRetention)
	}
	return nil
}

// Settings returns the settings in force.
func (l *Machine) Settings() Settings { return l.settings }

func (a *applier) setSettings(c *SetSettings) *Result {
	if err := c.Settings.Validate(); err != nil {
		return &Result{Status: StatusMalformed, Detail: err.Error()}
	}
	a.l.settings = c.Settings
	a.l.configDirty = true
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "settings.set", Status: StatusOK, Actor: c.Actor,
		Reason: fmt.Sprintf("audit_retention %d", c.Settings.AuditRetention)})
	return &Result{Status: StatusOK}
}

package fsm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// StoreFormat is the version of the key layout and values a Machine
// writes to its Store; Open refuses a store of another.
const StoreFormat = 1

// storeMeta is the value at metaKey: where the stored state stands.
type storeMeta struct {
	Format  int    `json:"format"`
	Applied uint64 `json:"applied"` // the log index the state is of
	Index   uint64 `json:"index"`   // the last command applied
	Now     int64  `json:"now"`
}

// storeConfig is the value at configKey.
type storeConfig struct {
	Policies []*Policy    `json:"policies,omitempty"`
	Keys     []SigningKey `json:"keys,omitempty"`
	Settings Settings     `json:"settings"`
}

// storedUsage is a namespace's usage as stored.
type storedUsage struct {
	Intents int                `json:"intents"`
	Bytes   int64              `json:"bytes"`
	States  [numStateCodes]int `json:"states"`
}

// Commit writes what changed in memory since the last Commit (usage,
// chain heads, policies, the applied index) to the store and commits it
// there: the store then holds the state after the log entry at index
// applied (which may be past the last command: entries that are not
// commands change nothing). Without a Sync it need not be durable.
func (l *Machine) Commit(applied uint64) {
	l.applied = max(applied, l.index)
	for ns := range l.dirty {
		if u := l.usage[ns]; u != nil {
			l.setJSON(nsKey(tableUsage, ns), storedUsage{Intents: u.intents, Bytes: u.bytes, States: u.states})
		} else {
			l.st.Delete(nsKey(tableUsage, ns))
		}
		if c := l.chains[ns]; c != nil {
			l.setJSON(nsKey(tableHead, ns), c.head)
		}
	}
	clear(l.dirty)
	if l.configDirty {
		cfg := storeConfig{Keys: l.keys, Settings: l.settings}
		for _, name := range slices.Sorted(maps.Keys(l.policies)) {
			cfg.Policies = append(cfg.Policies, l.policies[name])
		}
		l.setJSON(configKey, cfg)
		l.configDirty = false
	}
	l.setJSON(metaKey, storeMeta{Format: StoreFormat, Applied: l.applied, Index: l.index, Now: l.now})
	l.st.Commit()
}

// Sync makes everything committed durable: call it before the log behind
// the applied index may be dropped (a Raft snapshot).
func (l *Machine) Sync() { l.st.Sync() }

func (l *Machine) setJSON(key []byte, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fsm: encode %T: %v", v, err)) // our own types always encode
	}
	l.st.Set(key, b)
}

// load reads what Commit wrote.
func (l *Machine) load() error {
	raw, ok := l.st.Get(metaKey)
	if !ok {
		return nil // an empty store
	}
	var meta storeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("fsm: state store meta: %w", err)
	}
	if meta.Format != StoreFormat {
		return fmt.Errorf("fsm: state store format %d; this version reads %d", meta.Format, StoreFormat)
	}
	l.applied, l.index, l.now = meta.Applied, meta.Index, meta.Now
	if raw, ok := l.st.Get(configKey); ok {
		var cfg storeConfig
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("fsm: state store policies: %w", err)
		}
		l.keys, l.settings = cfg.Keys, cfg.Settings
		if len(cfg.Policies) > 0 {
			l.policies = make(map[string]*Policy, len(cfg.Policies))
			for _, p := range cfg.Policies {
				l.policies[p.Name] = p
			}
			l.reorder()
		}
	}
	var err error
	l.st.Scan([]byte{tableUsage}, []byte{tableUsage + 1}, func(k, v []byte) bool {
		var ns string
		if ns, _, err = parseNS(k[1:]); err != nil {
			return false
		}
		var su storedUsage
		if err = json.Unmarshal(v, &su); err != nil {
			return false
		}
		l.usage[ns] = &nsUsage{intents: su.Intents, bytes: su.Bytes, states: su.States}
		l.total += su.Intents
		for code, n := range su.States {
			if n != 0 {
				l.counts[stateCode(code).State()] += n
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("fsm: state store usage: %w", err)
	}
	l.st.Scan([]byte{tableHead}, []byte{tableHead + 1}, func(k, v []byte) bool {
		var ns string
		if ns, _, err = parseNS(k[1:]); err != nil {
			return false
		}
		c := newChain(ns)
		if err = json.Unmarshal(v, &c.head); err != nil {
			return false
		}
		l.chains[ns] = c
		return true
	})
	if err != nil {
		return fmt.Errorf("fsm: state store audit heads: %w", err)
	}
	return nil
}

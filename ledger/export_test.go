package ledger

// DropKEK takes s's key-encryption key away, as if s had been set up
// without one: TestSealedKeyOpenedOnce shows that a signer already cached
// no longer needs it.
func DropKEK(s *Service) { s.keys = &keyring{log: s.keys.log} }

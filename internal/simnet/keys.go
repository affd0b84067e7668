package simnet

// SetStrictKeys sets whether the server refuses a script's command that names a key the
// script was not given in KEYS (true), or runs it (false, the default). A refused
// redis.call raises a Lua error that ends the script, whose error reply holds "ERR script
// tried accessing undeclared key: <key> (<COMMAND>)"; a refused redis.pcall returns that
// message as an error table ({err = ...}). While it is on, a script's command that the
// table of simlua's commands.go does not know is refused the same ways, with an error that
// names it, and EVAL and EVALSHA run on the pooled engine (see SetPooledScripts), which
// makes the checks: so EVAL_RO and EVALSHA_RO, which miniredis would run unchecked, are
// refused, and EVALSHA of a script the engine was not given (by EVAL or SCRIPT LOAD) since
// the process started answers NOSCRIPT. The setting holds across restarts; it is safe for
// concurrent use.
func (s *Server) SetStrictKeys(on bool) { s.strict.Store(on) }

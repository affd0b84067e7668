package core

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
)

// Node is one independent Redis master, or one Redis Cluster addressed through a cluster
// client. Backends implement it for a driver; a Node must be safe for concurrent use.
type Node interface {
	// Eval runs s with keys and args and returns its reply, for a script that replies with
	// an array of integers, as every core script but leader does. Implementations send
	// EVALSHA with s.SHA1() and fall back to EVAL with s.Source() when the server replies
	// NOSCRIPT: each call runs the script exactly once. Eval honours ctx: it returns
	// soon after ctx's deadline passes or ctx is cancelled (core's calls, but a status's,
	// come under a context that ends only at its deadline: see EndsAtDeadline). A
	// transport or server error is returned as an error, never as a partial reply; a
	// closed driver client's error matches ErrClosed. Integer replies keep their sign, and
	// the reply is a new slice that the caller owns. Every argument is passed, empty ones
	// included. Eval must not change keys or args, nor keep them after it returns: core
	// shares them between calls. On Redis Cluster, keys of different slots are an error
	// (the server's CROSSSLOT, or one that matches ErrInvalid), never a panic.
	Eval(ctx context.Context, s *Script, keys []string, args ...string) ([]int64, error)

	// EvalStrings runs s as Eval does, for a script whose reply is an array of bulk strings
	// and integers, and returns each element as a string: a bulk string's bytes exactly (any
	// bytes, empty included), an integer in decimal ("-1"), and a nil element (Lua false)
	// as "". A reply that is not such an array (a nil reply, a string or integer alone, an
	// element that is an array) is an error. The rest of Eval's contract holds.
	EvalStrings(ctx context.Context, s *Script, keys []string, args ...string) ([]string, error)

	// String names the node in errors, for example "127.0.0.1:6379": non-empty, and
	// distinct for distinct servers.
	String() string
}

// Script is a Lua script with its SHA1 digest, computed once. A Script is immutable and
// safe for concurrent use.
type Script struct {
	name string
	src  string
	sha1 string
}

// NewScript returns the script src, called name in errors and logs.
func NewScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, sha1: hex.EncodeToString(sum[:])}
}

// Name returns the script's name, such as "acquire".
func (s *Script) Name() string { return s.name }

// Source returns the Lua source, for EVAL and SCRIPT LOAD.
func (s *Script) Source() string { return s.src }

// SHA1 returns the lowercase hex SHA1 digest of the source, for EVALSHA.
func (s *Script) SHA1() string { return s.sha1 }

// Ints converts a script's reply as most drivers decode it, an array ([]any) of int64, to
// the []int64 that Eval returns. Anything else is an error that names the script: for a
// backend whose driver decodes replies that way.
func Ints(s *Script, reply any) ([]int64, error) {
	arr, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("redlock: %s script replied %T, want an array", s.Name(), reply)
	}
	out := make([]int64, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("redlock: %s script replied %T at %d, want an integer", s.Name(), e, i)
		}
		out[i] = n
	}
	return out, nil
}

// Strings converts a script's reply as most drivers decode it, an array ([]any) of strings
// or []byte (bulk strings), int64 and nil, to the []string that EvalStrings returns (see
// Node.EvalStrings). Anything else is an error that names the script: for a backend whose
// driver decodes replies that way.
func Strings(s *Script, reply any) ([]string, error) {
	arr, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("redlock: %s script replied %T, want an array", s.Name(), reply)
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		switch e := e.(type) {
		case []byte:
			out[i] = string(e)
		case string:
			out[i] = e
		case int64:
			out[i] = strconv.FormatInt(e, 10)
		case nil:
		default:
			return nil, fmt.Errorf("redlock: %s script replied %T at %d, want a string or an integer", s.Name(), e, i)
		}
	}
	return out, nil
}

// Package core is the driver-neutral Redlock engine: the Node interface that each Redis
// driver backend implements, the Lua scripts, and the quorum fan-out that acquires, extends,
// raises the fence of, and releases a lock over N independent Redis masters.
//
// Most programs use the root package redlock instead; core is what a backend author and the
// root package build on. Lock semantics live here once: a backend only translates Node.Eval
// into its driver's calls.
package core

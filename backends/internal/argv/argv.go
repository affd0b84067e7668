// Package argv turns script arguments into the []any that go-redis and redigo take. The
// arguments that core sends on every call (PUBLISH, "leave", "0"...) are boxed once, here,
// rather than on every call: each boxed string is an allocation.
package argv

// Boxed once: an interface holding a string is an allocation when made at run time.
var (
	publish  any = "PUBLISH"
	spublish any = "SPUBLISH"
	leave    any = "leave"
	stay     any = "stay"
	zero     any = "0"
	one      any = "1"
)

// Append appends args to dst, each as an any, and returns the extended slice.
func Append(dst []any, args ...string) []any {
	for _, a := range args {
		dst = append(dst, Box(a))
	}
	return dst
}

// Box returns s as an any, without an allocation for core's constant arguments.
func Box(s string) any {
	switch s {
	case "PUBLISH":
		return publish
	case "SPUBLISH":
		return spublish
	case "leave":
		return leave
	case "stay":
		return stay
	case "0":
		return zero
	case "1":
		return one
	}
	return s
}

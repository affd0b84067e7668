module github.com/go-redlock/redlock/bench

go 1.25.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redlock/redlock v0.0.0
	github.com/go-redsync/redsync/v4 v4.17.0
	github.com/gomodule/redigo v1.9.3
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.79
	github.com/redis/rueidis/rueidiscompat v1.0.79
	github.com/valkey-io/valkey-go v1.0.79
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/go-redlock/redlock => ../

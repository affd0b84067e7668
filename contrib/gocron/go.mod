module github.com/go-redlock/redlock/contrib/gocron

go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/go-redlock/redlock v0.0.0
	github.com/google/uuid v1.6.0
	github.com/redis/go-redis/v9 v9.22.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/yuin/gopher-lua v1.1.2 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/go-redlock/redlock => ../..

module github.com/go-redlock/redlock

go 1.25.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/gomodule/redigo v1.9.3
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.79
	github.com/stretchr/testify v1.12.1
	github.com/valkey-io/valkey-go v1.0.79
	github.com/yuin/gopher-lua v1.1.2
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

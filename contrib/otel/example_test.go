package redlockotel_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redlock/redlock"
	"github.com/go-redlock/redlock/backends/goredis"
	redlockotel "github.com/go-redlock/redlock/contrib/otel"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// An Observer over an SDK MeterProvider: one Mutex held and released is one acquisition
// and one hold time. In a program, the MeterProvider has an exporter's reader, or the
// global one (otel.SetMeterProvider) is taken by default.
func ExampleNew() {
	reader := sdkmetric.NewManualReader()
	obs, err := redlockotel.New(redlockotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		panic(err)
	}

	server, _ := miniredis.Run()
	defer server.Close()
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer rdb.Close()
	client, err := redlock.New([]redlock.Node{goredis.New(rdb)}, redlock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer client.Close()

	m := client.NewMutex("report")
	m.Lock()
	fmt.Println("locked")
	m.Unlock()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			fmt.Println(m.Name, d.DataPoints[0].Value)
		case metricdata.Histogram[float64]:
			fmt.Println(m.Name, d.DataPoints[0].Count)
		}
	}
	// Unordered output:
	// locked
	// redlock.lock.acquisitions 1
	// redlock.lock.waits 0
	// redlock.lock.holdings 0
	// redlock.lock.wait.duration 1
	// redlock.lock.hold.duration 1
}

package node

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newRegistry is the node's own metrics registry (never the global default:
// several nodes share a process in tests). It holds the Go runtime and
// process collectors, prefixed edgebase_, and the build and node info; the
// packages register theirs as the node builds them.
func newRegistry(cfg Config) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	prefixed := prometheus.WrapRegistererWithPrefix("edgebase_", reg)
	version := cfg.Version
	if version == "" {
		version = "dev"
	}
	info := func(name, help string, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return 1 })
	}
	for _, c := range []struct {
		r prometheus.Registerer
		c prometheus.Collector
	}{
		{prefixed, collectors.NewGoCollector()},
		{prefixed, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
		{reg, info("edgebase_build_info", "Always 1; the labels name the build this node runs.",
			prometheus.Labels{"version": version, "goversion": runtime.Version()})},
		{reg, info("edgebase_node_info", "Always 1; the labels name this node and whether it was started as a voter (not --edge).",
			prometheus.Labels{"node_id": cfg.NodeID, "voter": strconv.FormatBool(!cfg.Edge)})},
	} {
		if err := c.r.Register(c.c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return reg, nil
}

// metricsHandler serves reg in the Prometheus text format (or what the
// scraper negotiates); a collector that fails leaves the rest served.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

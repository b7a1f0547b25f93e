// Command wanproxy is the simulated wide-area network of edgebase's WAN
// harness (internal/wan): Shopify's toxiproxy v2 server run as a library,
// whose proxies (one per source region, destination node and port kind) get
// latency toxics for the round trips between regions. It is a module of its
// own so that toxiproxy's dependencies stay out of edgebase's go.mod.
//
// Besides toxiproxy's toxics it has "handshake" (handshake.go): the first
// bytes of each connection wait one more round trip, as a TCP handshake
// would make them.
//
// It serves toxiproxy's REST API (the routes of toxiproxy-server) on
// -host:-port (port 0 picks a free one) and prints "api <host:port>" on
// standard output, as one line, once the API accepts connections. It logs
// to standard error at -log-level (zerolog's levels; warn by default, since
// toxiproxy logs every accepted connection at info). SIGTERM or SIGINT stops
// it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wanproxy:", err)
		os.Exit(1)
	}
}

func run() error {
	host := flag.String("host", "127.0.0.1", "address for the API to listen on")
	port := flag.Int("port", 0, "port for the API to listen on (0: a free one)")
	level := flag.String("log-level", "warn", "log level (zerolog: debug, info, warn, error)")
	flag.Parse()

	lvl, err := zerolog.ParseLevel(*level)
	if err != nil {
		return fmt.Errorf("-log-level %q: %w", *level, err)
	}
	logger := zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()

	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)

	ln, err := net.Listen("tcp", net.JoinHostPort(*host, fmt.Sprint(*port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: routes(server), ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("api %s\n", ln.Addr())

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// routes are toxiproxy-server's routes (ApiServer.Listen builds the same
// router but only on a host:port it cannot report when the port is 0).
func routes(s *toxiproxy.ApiServer) http.Handler {
	r := mux.NewRouter()
	r.HandleFunc("/reset", s.ResetState).Methods("POST")
	r.HandleFunc("/proxies", s.ProxyIndex).Methods("GET")
	r.HandleFunc("/proxies", s.ProxyCreate).Methods("POST")
	r.HandleFunc("/populate", s.Populate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}", s.ProxyShow).Methods("GET")
	r.HandleFunc("/proxies/{proxy}", s.ProxyUpdate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}", s.ProxyDelete).Methods("DELETE")
	r.HandleFunc("/proxies/{proxy}/toxics", s.ToxicIndex).Methods("GET")
	r.HandleFunc("/proxies/{proxy}/toxics", s.ToxicCreate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", s.ToxicShow).Methods("GET")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", s.ToxicUpdate).Methods("POST")
	r.HandleFunc("/proxies/{proxy}/toxics/{toxic}", s.ToxicDelete).Methods("DELETE")
	r.HandleFunc("/version", s.Version).Methods("GET")
	return r
}

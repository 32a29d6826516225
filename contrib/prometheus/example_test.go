package prometheus_test

import (
	"log"
	"net/http"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rivetkv/rivet"
	rivetprom "github.com/rivetkv/rivet/contrib/prometheus"
)

// Example serves a database's metrics on /metrics.
func Example() {
	dir, _ := os.MkdirTemp("", "rivet-metrics")
	defer os.RemoveAll(dir)
	db, err := rivet.Open(filepath.Join(dir, "app.db"), 0o600, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(rivetprom.NewCollector(db, rivetprom.Options{ConstLabels: prometheus.Labels{"db": "app"}}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// A real program would now run: log.Fatal(http.ListenAndServe(":9090", mux))
	_ = mux
}

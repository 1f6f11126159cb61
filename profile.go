//go:build profile

package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// Built with -tags profile only (the load test's LOAD_PROFILE): CPS_PROFILE_ADDR, a loopback
// address, serves Go's profiles (/debug/pprof/), apart from the extender's own port and
// without its authentication. Release builds have none of it.
func init() {
	addr := os.Getenv("CPS_PROFILE_ADDR")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		panic("CPS_PROFILE_ADDR must be a loopback host:port, not " + addr)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	go func() { _ = http.ListenAndServe(addr, mux) }()
}

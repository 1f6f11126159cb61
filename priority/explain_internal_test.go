package priority

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestWriteFixed2MatchesStrconv pins the fast path of writeFixed2 to strconv's digits.
func TestWriteFixed2MatchesStrconv(t *testing.T) {
	vals := []float64{0, 1, 0.005, 0.015, 0.125, 0.375, 0.625, 0.875, 0.285, 0.145, 0.545, 0.995, 0.994999, 1.5, -0.25, 123.456}
	r := rand.New(rand.NewPCG(1, 1))
	for range 200000 {
		vals = append(vals, r.Float64())
	}
	for i := 0; i <= 1000; i++ {
		vals = append(vals, float64(i)/1000)
	}
	for _, x := range vals {
		var b strings.Builder
		writeFixed2(&b, x)
		if want := strconv.FormatFloat(x, 'f', 2, 64); b.String() != want {
			t.Fatalf("writeFixed2(%v) = %q, want %q", x, b.String(), want)
		}
	}
}

// TestFormatQuantity checks formatQuantity and, where a row sets it, amount (the resource
// named with its amount, as the sentences say it).
func TestFormatQuantity(t *testing.T) {
	tests := []struct {
		name     string
		resource string
		v        int64
		want     string
		amount   string
	}{
		{"cpu in millicores", "cpu", 4000, "4000m", "cpu 4000m"},
		{"cpu fraction", "cpu", 250, "250m", ""},
		{"memory Gi", "memory", 16 << 30, "16Gi", ""},
		{"memory Mi", "memory", 1536 << 20, "1536Mi", ""},
		{"memory Ki", "memory", 3 << 10, "3Ki", ""},
		{"memory bytes", "memory", 1000, "1000", ""},
		{"memory zero", "memory", 0, "0", ""},
		{"ephemeral storage Ti", "ephemeral-storage", 2 << 40, "2Ti", ""},
		{"hugepages", "hugepages-2Mi", 4 << 20, "4Mi", ""},
		{"extended", "nvidia.com/gpu", 2, "2", "nvidia.com/gpu 2"},
		{"devices of a class", DeviceClassPrefix + "gpu.example.com", 8, "8", "8 gpu.example.com devices"},
		{"one device", DeviceClassPrefix + "gpu.example.com", 1, "1", "1 gpu.example.com device"},
		{"devices a request's selectors pick", DeviceClassPrefix + "gpu.example.com" + DeviceSelectedSep + "1f2e", 5, "5",
			"5 gpu.example.com devices its requests' selectors accept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := formatQuantity(tt.resource, tt.v); got != tt.want {
				t.Errorf("formatQuantity(%q, %d) = %q, want %q", tt.resource, tt.v, got, tt.want)
			}
			if got := amount(tt.resource, tt.v); tt.amount != "" && got != tt.amount {
				t.Errorf("amount(%q, %d) = %q, want %q", tt.resource, tt.v, got, tt.amount)
			}
		})
	}
}

package domain_test

import (
	"fmt"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/spf13/afero"

	"github.com/novox/postgres-provider/domain"
)

// BenchmarkSteadyPass is one pass over 1,000 consumers that are all applied and unchanged,
// between verify intervals: what the loop costs every Every while nothing happens.
func BenchmarkSteadyPass(b *testing.B) {
	fs := afero.NewMemMapFs()
	var entries []any
	for i := range 1000 {
		as := fmt.Sprintf("consumer%04d", i)
		secret := "/s/" + as
		_ = afero.WriteFile(fs, secret, []byte("password-"+as+"\n"), 0o600)
		entries = append(entries, map[string]any{"as": as, "secret": secret, "node": as, "at": "10.0.0.7",
			"values": map[string]any{"name": as, "extensions": []any{"vector", "pg_trgm"}}, "derived": map[string]any{"database": as}})
	}
	raw := fmt.Sprintf(`{"requirement": "postgres", "given": %s}`, mustJSON(b, entries))
	_ = afero.WriteFile(fs, receives, []byte(raw), 0o600)
	backend := &fakeBackend{}
	h := domain.New(domain.Config{Resource: "postgres", Receives: receives}, fs, clock.NewMock(), backend, nil, &fakeLogger{})
	if r := h.Reconcile(ctx); r.Created != 1000 {
		b.Fatalf("created %d, want 1000", r.Created)
	}
	b.ReportAllocs()
	for b.Loop() {
		h.Reconcile(ctx)
	}
	if len(backend.creates) != 1000 || len(backend.holdsCalls) != 0 {
		b.Fatalf("a steady pass created or checked: %d creates, %d checks", len(backend.creates), len(backend.holdsCalls))
	}
}

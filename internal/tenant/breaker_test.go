package tenant

import (
	"errors"
	"testing"
	"time"
)

func TestBreakersAreKeptPerTenant(t *testing.T) {
	b := NewBreakers(2, time.Minute)
	now := time.Unix(1000, 0)
	fail := errors.New("upstream down")
	if b.Record("a", fail, now) {
		t.Fatal("one failure opened the breaker of threshold 2")
	}
	if !b.Record("a", fail, now) || !b.Open("a", now) {
		t.Fatal("the second failure in a row did not open it")
	}
	if b.Open("b", now) {
		t.Fatal("another tenant's failures opened b's breaker")
	}
	if b.Open("a", now.Add(time.Minute)) {
		t.Fatal("still open after the cool-down")
	}
	b.Record("a", nil, now.Add(time.Minute))
	if b.Record("a", fail, now.Add(time.Minute)) {
		t.Fatal("a success did not reset the count")
	}
}

func TestBreakersForgetTenantsPastTheBound(t *testing.T) {
	b := NewBreakers(1, time.Minute)
	now := time.Unix(1000, 0)
	for i := range MaxBreakerTenants + 10 {
		b.Record(ID(string(rune('a'+i%26))+string(rune(i))), errors.New("x"), now)
	}
	if n := len(b.state); n > MaxBreakerTenants {
		t.Fatalf("%d tenants remembered, over the bound of %d", n, MaxBreakerTenants)
	}
}

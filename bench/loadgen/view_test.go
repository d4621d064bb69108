package main

import "testing"

func TestMatchingIn(t *testing.T) {
	for _, k := range []int{1, 3, 100} {
		for f := 0; f < k; f++ {
			for after := uint64(0); after < 250; after += 7 {
				for through := after; through < after+260; through += 11 {
					want := int64(0)
					for s := after + 1; s <= through; s++ {
						if (s-1)%uint64(k) == uint64(f) {
							want++
						}
					}
					if got := matchingIn(after, through, f, k); got != want {
						t.Fatalf("matchingIn(%d, %d, %d, %d) = %d, want %d", after, through, f, k, got, want)
					}
				}
			}
		}
	}
}

func TestTenantOf(t *testing.T) {
	entry := []byte(`{"seq":5,"processingId":"p","key":"k","data":{"tenant": "t42", "n": 4},"commitMs":1}`)
	if got := tenantOf(entry, 0, len(entry)); got != 42 {
		t.Fatalf("tenantOf = %d", got)
	}
	if got := tenantOf([]byte(`{"data":{"n": 4}}`), 0, 16); got != -1 {
		t.Fatalf("tenantOf without a tenant = %d", got)
	}
}

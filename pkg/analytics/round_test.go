package analytics

import "testing"

func TestRoundHalfAwayFromZero(t *testing.T) {
	cases := []struct {
		v      float64
		places int
		want   float64
	}{
		{1.005, 2, 1.01}, {-1.005, 2, -1.01}, {2.5, 0, 3}, {-2.5, 0, -3}, {0.125, 2, 0.13},
		{1.23456, 3, 1.235}, {1.23449, 3, 1.234}, {12345.6789, 0, 12346}, {1.5, -1, 1.5},
		{0.1 + 0.2, 16, 0.3000000000000000}, {1e-20, 4, 0},
	}
	for _, c := range cases {
		if got := Round(c.v, c.places); got != c.want {
			t.Errorf("Round(%v, %d) = %v, want %v", c.v, c.places, got, c.want)
		}
	}
}

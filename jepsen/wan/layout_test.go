package wan

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseLayout(t *testing.T) {
	l, err := ParseLayout("eu:2+1, us:2,ap:1")
	if err != nil {
		t.Fatal(err)
	}
	if l.String() != "eu:2+1,us:2,ap:1" || l.Nodes() != 6 || l.Voters() != 5 {
		t.Fatalf("layout %s: %d nodes, %d voters", l, l.Nodes(), l.Voters())
	}
	var regions []string
	var voters []bool
	for i := 1; i <= l.Nodes(); i++ {
		regions = append(regions, l.RegionOf(i))
		voters = append(voters, l.Voter(i))
	}
	if want := []string{"eu", "eu", "eu", "us", "us", "ap"}; !reflect.DeepEqual(regions, want) {
		t.Errorf("regions %v, want %v", regions, want)
	}
	if want := []bool{true, true, false, true, true, true}; !reflect.DeepEqual(voters, want) {
		t.Errorf("voters %v, want %v", voters, want)
	}
	if got := l.NodesIn("us"); !reflect.DeepEqual(got, []int{4, 5}) {
		t.Errorf("NodesIn(us) = %v", got)
	}
	if l.RegionOf(7) != "" || l.Voter(0) || !l.MinorityRegions() {
		t.Error("outside the layout, or minority regions")
	}
	if one, _ := ParseLayout("eu:3,us:2"); one.MinorityRegions() {
		t.Error("eu holds a quorum of 5, yet MinorityRegions")
	}
	for _, bad := range []string{"", "eu", "eu:x", "EU:1", "eu:1,eu:2", "eu:0", "eu:0+1", "eu:1+y", "eu:-1"} {
		if _, err := ParseLayout(bad); err == nil {
			t.Errorf("ParseLayout(%q) accepted", bad)
		}
	}
	if got := OnePerNode(3).String(); got != "n1:1,n2:1,n3:1" {
		t.Errorf("OnePerNode(3) = %s", got)
	}
}

func TestParseRTTAndMatrix(t *testing.T) {
	l, _ := ParseLayout("eu:2,us:2,ap:1")
	rtt, err := ParseRTT("eu-us=80ms,ap-eu=150ms,us-ap=150ms,eu-eu=2ms", l)
	if err != nil {
		t.Fatal(err)
	}
	if rtt.Between("us", "eu") != 80*time.Millisecond || rtt.Between("eu", "ap") != 150*time.Millisecond {
		t.Errorf("rtt %v", rtt)
	}
	m := NewMatrix(l, rtt, 0.1)
	for _, c := range []struct {
		from, to int
		want     time.Duration
	}{{1, 2, time.Millisecond}, {1, 3, 40 * time.Millisecond}, {4, 5, 75 * time.Millisecond}, {3, 4, 0}, {5, 5, 0}, {0, 1, 0}, {1, 9, 0}} {
		if got := m.OneWay(c.from, c.to); got != c.want {
			t.Errorf("OneWay(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if m.Max() != 75*time.Millisecond || m.Nodes() != 5 {
		t.Errorf("Max %v, Nodes %d", m.Max(), m.Nodes())
	}
	slow := m.Change([]int{5}, []int{1, 2, 3, 4, 5}, func(d time.Duration) time.Duration { return 3 * d })
	if slow.OneWay(5, 1) != 225*time.Millisecond || slow.OneWay(1, 5) != 75*time.Millisecond || m.OneWay(5, 1) != 75*time.Millisecond {
		t.Errorf("Change: 5→1 %v, 1→5 %v, original 5→1 %v", slow.OneWay(5, 1), slow.OneWay(1, 5), m.OneWay(5, 1))
	}
	if s := slow.String(); !strings.Contains(s, "n1-n3 80ms") || !strings.Contains(s, "n5>n1 225ms") || !strings.Contains(s, "jitter 10%") {
		t.Errorf("String = %s", s)
	}

	all, err := ParseRTT("100ms,eu-us=30ms", l)
	if err != nil || all.Between("eu", "us") != 30*time.Millisecond || all.Between("us", "ap") != 100*time.Millisecond {
		t.Errorf("bare duration: %v %v", all, err)
	}
	for _, bad := range []string{"eu-us=80ms", "eu-xx=1ms,100ms", "eu-us=-1ms,100ms", "eu-us=fast,100ms", "eu=1ms"} {
		if _, err := ParseRTT(bad, l); err == nil {
			t.Errorf("ParseRTT(%q) accepted", bad)
		}
	}
}

func TestParseJitter(t *testing.T) {
	for in, want := range map[string]float64{"10%": 0.1, "0.25": 0.25, "": 0, "0": 0} {
		if got, err := ParseJitter(in); err != nil || got != want {
			t.Errorf("ParseJitter(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"100%", "1", "-5%", "lots", "NaN"} {
		if _, err := ParseJitter(bad); err == nil {
			t.Errorf("ParseJitter(%q) accepted", bad)
		}
	}
}

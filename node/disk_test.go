package node

import (
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDiskCollectorExportsTheDataDirsFileSystem(t *testing.T) {
	cases := []struct {
		name   string
		dir    string
		series int
	}{
		{"existing data dir", t.TempDir(), 2},
		{"missing data dir exports nothing (control)", filepath.Join(t.TempDir(), "gone"), 0},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if n := testutil.CollectAndCount(newDiskCollector(tt.dir)); n != tt.series {
				t.Fatalf("%d series, want %d", n, tt.series)
			}
			free, size, err := diskSpace(tt.dir)
			if tt.series == 0 {
				if err == nil {
					t.Fatal("statfs of a missing dir succeeded")
				}
				return
			}
			if err != nil || size == 0 || free > size {
				t.Fatalf("free %d of %d bytes, err %v", free, size, err)
			}
		})
	}
}

package robustness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/anishathalye/porcupine"
)

// WriteReport writes dir/history.json (the records, indented) and, when info
// is non-empty, dir/linearizability.html (porcupine's visualisation of the
// history and its longest linearizations), creating dir. It returns the
// paths written, also when it fails part way.
func WriteReport(dir string, recs []Record, info porcupine.LinearizationInfo) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create report dir: %w", err)
	}
	var written []string
	if recs == nil {
		recs = []Record{}
	}
	data, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return written, fmt.Errorf("encode history: %w", err)
	}
	histPath := filepath.Join(dir, "history.json")
	if err := os.WriteFile(histPath, append(data, '\n'), 0o644); err != nil {
		return written, fmt.Errorf("write history: %w", err)
	}
	written = append(written, histPath)

	if len(info.PartialLinearizations()) == 0 {
		return written, nil
	}
	htmlPath := filepath.Join(dir, "linearizability.html")
	if err := visualize(htmlPath, info); err != nil {
		return written, fmt.Errorf("write linearizability visualisation: %w", err)
	}
	written = append(written, htmlPath)
	return written, nil
}

// visualize runs porcupine.VisualizePath, turning a panic in porcupine (it
// panics when a model step it replays fails) into an error so a report
// never takes the test binary down.
func visualize(path string, info porcupine.LinearizationInfo) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("porcupine visualisation panicked: %v", p)
		}
	}()
	return porcupine.VisualizePath(Model(), info, path)
}

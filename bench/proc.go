package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports (sysconf needs cgo to ask).
const clockTicks = 100

// cpuTime is a process's CPU time so far, in seconds.
type cpuTime struct{ user, system float64 }

func (c cpuTime) total() float64 { return c.user + c.system }

func (c cpuTime) sub(d cpuTime) cpuTime { return cpuTime{c.user - d.user, c.system - d.system} }

// cpuSeconds is the CPU time a process has used so far, from
// /proc/<pid>/stat (pid 0: this process).
func cpuSeconds(pid int) (cpuTime, error) {
	b, err := os.ReadFile(procPath(pid, "stat"))
	if err != nil {
		return cpuTime{}, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a stat line.
// The command name (field 2) is in parentheses and may hold spaces, so the
// fields are counted from its closing parenthesis.
func parseStatCPU(b []byte) (cpuTime, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return cpuTime{}, fmt.Errorf("malformed /proc stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return cpuTime{}, fmt.Errorf("short /proc stat line")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return cpuTime{}, fmt.Errorf("bad utime/stime in /proc stat line")
	}
	return cpuTime{float64(ut) / clockTicks, float64(st) / clockTicks}, nil
}

// peakRSS is the process's resident-set high-water mark (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	return statusField(pid, "VmHWM:")
}

// currentRSS is the process's resident set size (VmRSS) in bytes.
func currentRSS(pid int) (int64, error) {
	return statusField(pid, "VmRSS:")
}

// statusField reads one "Name:  N kB" line of /proc/<pid>/status in bytes.
func statusField(pid int, name string) (int64, error) {
	f, err := os.Open(procPath(pid, "status"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		fs := strings.Fields(line[len(name):])
		if len(fs) == 0 {
			break
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", name, line, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s in %s", name, procPath(pid, "status"))
}

// resetPeakRSS sets VmHWM back to the current RSS (writing 5 to clear_refs,
// Linux 4.0+), so that the next peakRSS covers only what follows. It reports
// whether the reset worked; when not, peaks are the process's lifetime peak.
func resetPeakRSS(pid int) bool {
	return os.WriteFile(procPath(pid, "clear_refs"), []byte("5"), 0) == nil
}

func procPath(pid int, file string) string {
	if pid == 0 {
		return "/proc/self/" + file
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + file
}

// systemCPU is the busy CPU time of the whole machine so far (all CPUs:
// user, nice, system, irq, softirq, steal), from the first line of /proc/stat.
func systemCPU() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseSystemCPU(b)
}

func parseSystemCPU(b []byte) (float64, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0, fmt.Errorf("malformed /proc/stat")
	}
	var busy uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc/stat: %w", err)
		}
		busy += n
	}
	return float64(busy) / clockTicks, nil
}

// loadAverage is the 1-minute load average ("" when unknown).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}

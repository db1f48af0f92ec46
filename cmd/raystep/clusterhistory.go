package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raystep/raystep/fleet"
	"github.com/raystep/raystep/history"
)

// clusterLedger keeps, for the history, the interactive and run-scoped
// clusters in scope before a command (down, gc) deletes some: those gone
// afterwards get a record of their life (who, what shape, how long, the
// GPU-hours they held at full size, why they ended).
type clusterLedger struct {
	a      *app
	cmd    *cobra.Command
	fleets []fleet.Fleet
	scope  fleet.Scope
	before map[string]fleet.Record
}

func clusterKey(r fleet.Record) string { return r.Backend + "/" + r.Namespace + "/" + r.Name }

// noteClusters lists the clusters people and runs hold in scope; nil when
// they cannot be listed (the command goes on; its own listing says why).
func (a *app) noteClusters(cmd *cobra.Command, fleets []fleet.Fleet, scope fleet.Scope) *clusterLedger {
	recs, err := fleet.List(cmd.Context(), fleets, scope)
	if err != nil {
		a.log.Debug("no cluster history for this command", zap.Error(err))
		return nil
	}
	l := &clusterLedger{a: a, cmd: cmd, fleets: fleets, scope: scope, before: map[string]fleet.Record{}}
	for _, r := range recs {
		if r.ClusterKind == fleet.KindInteractive || r.ClusterKind == fleet.KindRun {
			l.before[clusterKey(r)] = r
		}
	}
	return l
}

// record writes the history of the clusters noted before that are gone
// now, with reason; it returns how many it recorded.
func (l *clusterLedger) record(reason string) int {
	if l == nil || len(l.before) == 0 {
		return 0
	}
	after, err := fleet.List(l.cmd.Context(), l.fleets, l.scope)
	if err != nil {
		l.a.log.Debug("no cluster history for this command", zap.Error(err))
		return 0
	}
	still := map[string]bool{}
	for _, r := range after {
		still[clusterKey(r)] = true
	}
	profile, err := l.a.profile(l.cmd)
	if err != nil {
		return 0
	}
	now := time.Now().UTC()
	n := 0
	for key, r := range l.before {
		if still[key] {
			continue
		}
		rec := clusterRecord(r, reason, now)
		if err := l.a.keepRecord(profile.Spec.History.URL, rec, ""); err != nil {
			l.a.warnHistory(err)
			continue
		}
		n++
	}
	return n
}

// clusterRecord is the history record of cluster r, ended at now.
func clusterRecord(r fleet.Record, reason string, now time.Time) history.Record {
	started := r.Created.UTC()
	if started.IsZero() || started.After(now) {
		started = now
	}
	rec := history.Record{
		Name: clusterRecordName(r.Name, started), Kind: r.ClusterKind, Spec: r.Name, Owner: r.Owner, Namespace: r.Namespace,
		DagsterRun: r.RunID, Backend: r.Backend, Cluster: r.Name, ExitCode: -1, Reason: reason, Started: started, Ended: now,
	}
	for _, part := range strings.Split(r.GPUs, ",") {
		typ, count, ok := strings.Cut(part, "=")
		if n, err := strconv.Atoi(count); ok && err == nil {
			rec.GPUType = strings.Join(append(strings.Fields(rec.GPUType), typ), ",")
			rec.GPUCount += n
		}
	}
	rec.GPUHours = float64(rec.GPUCount) * now.Sub(started).Hours()
	return rec
}

// clusterRecordName names a cluster's record: its name and when it was
// made (a name is used again by the next cluster of that name), a DNS
// label.
func clusterRecordName(name string, created time.Time) string {
	stamp := created.Format("20060102t150405")
	if len(name) > 63-len(stamp)-1 {
		name = strings.TrimRight(name[:63-len(stamp)-1], "-")
	}
	return name + "-" + stamp
}

// keepRecord writes rec (and the log at logPath, if any) into this
// machine's history and the store at url (if any, within
// remoteWriteLimit).
func (a *app) keepRecord(url string, rec history.Record, logPath string) error {
	var errs []error
	if dir, err := a.historyDir(); err == nil {
		errs = append(errs, dir.Put(rec))
	}
	if url != "" {
		errs = append(errs, putRemote(url, rec, logPath))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

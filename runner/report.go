package runner

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// hold keeps a driver's materialization until the end, merging repeated
// reports for one asset (later metadata keys and data version win).
func (s *state) hold(m *pipes.Message) error {
	p, err := m.Materialization()
	if err != nil {
		return err
	}
	if p.AssetKey == "" {
		return errors.New(`params: no "asset_key"`)
	}
	for _, h := range s.held {
		if h.AssetKey == p.AssetKey {
			maps.Copy(h.Metadata, p.Metadata)
			if p.DataVersion != "" {
				h.DataVersion = p.DataVersion
			}
			return nil
		}
	}
	if p.Metadata == nil {
		p.Metadata = pipes.Metadata{}
	}
	s.held = append(s.held, &p)
	return nil
}

// report sends the materializations once, at the end: the driver's, with
// raystep's metadata merged in, or raystep's own for each asset when the job
// succeeded and the driver reported none. Nothing is reported when no job
// was submitted.
func (s *state) report(stepErr error) {
	if !s.submitted {
		return
	}
	mats := s.held
	if len(mats) == 0 && stepErr == nil {
		for _, key := range s.step.Dagster.AssetKeys {
			mats = append(mats, &pipes.Materialization{AssetKey: key})
		}
	}
	ours := s.metadata()
	for _, mat := range mats {
		merged := maps.Clone(mat.Metadata)
		if merged == nil {
			merged = pipes.Metadata{}
		}
		maps.Copy(merged, ours)
		s.sendMaterialization(pipes.Materialization{AssetKey: mat.AssetKey, DataVersion: mat.DataVersion, Metadata: merged}, ours)
	}
}

// sendMaterialization sends mat; if the session refuses it (the driver's
// metadata was invalid), it sends raystep's own metadata alone instead.
func (s *state) sendMaterialization(mat pipes.Materialization, ours pipes.Metadata) {
	if s.r.Session == nil {
		s.renderMaterialization(mat)
		return
	}
	err := s.sendMat(mat)
	if errors.Is(err, ErrInvalidMessage) {
		s.warn(PhaseReport, "the driver's materialization of %s was invalid (%v): reporting raystep's metadata alone", mat.AssetKey, err)
		mat.Metadata = ours
		err = s.sendMat(mat)
	}
	if err != nil && s.sendErr == nil {
		s.sendErr = fmt.Errorf("report materialization of %s: %w", mat.AssetKey, err)
	}
}

// sendMat builds mat's message and sends it.
func (s *state) sendMat(mat pipes.Materialization) error {
	m, err := pipes.MaterializationMessage(mat)
	if err != nil {
		return err
	}
	return s.r.Session.Send(m)
}

// metadata is raystep's own metadata, every key prefixed "raystep/".
func (s *state) metadata() pipes.Metadata {
	m := pipes.Metadata{}
	put := func(key string, v pipes.MetadataValue) { m["raystep/"+key] = v }
	put("submission_id", pipes.Text(s.id))
	if s.info.JobID != "" {
		put("ray_job_id", pipes.Text(s.info.JobID))
	}
	if u := s.dash.shownURL(); u != "" {
		put("dashboard_url", pipes.URL(u))
	}
	if s.step.HistoryURL != "" {
		put("history_url", pipes.URL(s.step.HistoryURL))
	}
	put("backend", pipes.Text(s.r.Backend.Name()))
	if s.cluster != nil {
		put("cluster", pipes.Text(s.cluster.Name()))
	}
	if s.step.Shape != "" {
		put("cluster_shape", pipes.Text(s.step.Shape))
	}
	put("spec", pipes.Text(s.step.Name))
	if s.step.Kind != "" {
		put("kind", pipes.Text(s.step.Kind))
	}
	if s.info.Status != "" {
		put("status", pipes.Text(string(s.info.Status)))
	}
	put("attached", pipes.Bool(s.attached))
	if n := s.step.Dagster.RetryNumber; n > 0 {
		// The attempts of this step Dagster made before this one:
		// RaystepResource retries preempted steps only.
		put("preemptions_survived", pipes.Int(int64(n)))
	}
	if s.step.GPUType != "" {
		put("gpu_type", pipes.Text(s.step.GPUType))
	}
	put("gpu_count", pipes.Int(int64(s.step.GPUCount)))
	put("gpu_hours", pipes.Float(round(float64(s.step.GPUCount)*s.jobTime().Hours(), 1e6)))
	for _, pt := range s.durations {
		put("duration_"+string(pt.phase)+"_s", seconds(pt.d))
	}
	put("duration_total_s", seconds(s.clock.Now().Sub(s.start)))
	return m
}

// jobTime is how long the job held the cluster: Ray's start to end when
// Ray knows both, else the time raystep followed it.
func (s *state) jobTime() time.Duration {
	if !s.info.Start.IsZero() && s.info.End.After(s.info.Start) {
		return s.info.End.Sub(s.info.Start)
	}
	return s.duration(PhaseRun)
}

// seconds is d in seconds, to the millisecond, as float metadata (which
// pipes.Float writes with its decimal point: Dagster reads 2.0 as a float).
func seconds(d time.Duration) pipes.MetadataValue {
	return pipes.Float(round(d.Seconds(), 1e3))
}

// round rounds f to 1/scale.
func round(f, scale float64) float64 { return math.Round(f*scale) / scale }

// close sends "closed" (with the exception when the step failed) and tells
// the step's end: done or failed, for a person.
func (s *state) close(stepErr error) error {
	total := s.clock.Now().Sub(s.start).Seconds()
	if stepErr == nil {
		s.emit(Event{Phase: PhaseReport, Kind: KindDone, Message: fmt.Sprintf("job %s %s in %.1fs", s.id, s.info.Status, total)})
	} else {
		s.emit(Event{Phase: PhaseReport, Kind: KindFailed, Message: stepErr.Error()})
	}
	if s.r.Session == nil {
		return nil
	}
	if stepErr != nil { // shown in the run's event log, beside the exception
		s.sendLog(pipes.LevelError, "raystep failed: "+stepErr.Error())
	}
	if err := s.r.Session.Close(exceptionFor(stepErr)); err != nil {
		return &InfraError{Phase: PhaseReport, Err: fmt.Errorf("close pipes session: %w", err)}
	}
	return nil
}

// sortedKeys returns the metadata's keys in order.
func sortedKeys(m pipes.Metadata) []string { return slices.Sorted(maps.Keys(m)) }

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/raystep/raystep/dagster_integration/pipes"
)

// relayChild runs a child that speaks Pipes on its stdout (a Python driver
// using dagster-pipes, as a Ray job's driver does), relays its plain output,
// and forwards its messages, adding metadata to its materialization.
func relayChild(s *pipes.Session, argv []string) error {
	if len(argv) == 0 {
		return errors.New("relay mode needs the child command after --")
	}
	env, err := pipes.BootstrapEnv(pipes.ContextDataParams(s.Context().Data()), pipes.StdioMessagesParams("stdout"))
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = s.Stderr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("child stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start child: %w", err)
	}
	relay := &pipes.Relay{
		Out:       s.Stdout(),
		OnMessage: func(m *pipes.Message) error { return forward(s, m) },
		OnWarning: func(w string) { _ = s.Log(pipes.LevelWarning, w) },
	}
	_, rerr := relay.ReadFrom(stdout)
	werr := cmd.Wait()
	return errors.Join(rerr, werr)
}

func forward(s *pipes.Session, m *pipes.Message) error {
	switch m.Method {
	case pipes.MethodOpened:
		return nil
	case pipes.MethodClosed:
		if len(m.Params) > 0 && string(m.Params) != "{}" && string(m.Params) != "null" {
			return s.Log(pipes.LevelError, "child closed with "+string(m.Params))
		}
		return nil
	case pipes.MethodReportMaterialize:
		mat, err := m.Materialization()
		if err != nil {
			return err
		}
		if mat.Metadata == nil {
			mat.Metadata = pipes.Metadata{}
		}
		mat.Metadata["relayed_by"] = pipes.Text("pipes-example")
		amended, err := pipes.MaterializationMessage(mat)
		if err != nil {
			return err
		}
		return s.Forward(amended)
	}
	return s.Forward(m)
}

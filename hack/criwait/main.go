package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	endpoint := flag.String("endpoint", "", "CRI endpoint, unix:///path")
	timeout := flag.Duration("timeout", time.Minute, "how long to wait")
	flag.Parse()
	if err := run(*endpoint, *timeout, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "criwait:", err)
		os.Exit(1)
	}
}

func run(endpoint string, timeout time.Duration, images []string) error {
	if endpoint == "" || len(images) == 0 {
		return fmt.Errorf("usage: criwait -endpoint unix:///path IMAGE...")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := runtimeapi.NewImageServiceClient(conn)
	for {
		missing := ""
		for _, img := range images {
			resp, err := client.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: img}})
			if err != nil || resp.GetImage() == nil {
				missing = img
				break
			}
		}
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("image %s not listed by %s after %v", missing, endpoint, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// lagWatches makes the fake clientset's watches of resource deliver every event
// delay after it happened, as a watch that is behind (cut and resumed, or
// relisting) does: the controller's cache of them lags the API.
func lagWatches(client *fake.Clientset, resource string, delay time.Duration) {
	client.PrependWatchReactor(resource, func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if w, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = w.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		return true, lagged(w, delay), nil
	})
}

type laggedEvent struct {
	ev watch.Event
	at time.Time
}

// lagged forwards w's events, in order, each delay after it came.
func lagged(w watch.Interface, delay time.Duration) watch.Interface {
	out := make(chan watch.Event)
	pw := watch.NewProxyWatcher(out)
	queue := make(chan laggedEvent, 1024)
	go func() {
		defer close(queue)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				queue <- laggedEvent{ev, time.Now()}
			case <-pw.StopChan():
				w.Stop()
				return
			}
		}
	}()
	go func() {
		defer close(out)
		for e := range queue {
			time.Sleep(time.Until(e.at.Add(delay)))
			select {
			case out <- e.ev:
			case <-pw.StopChan():
				return
			}
		}
	}()
	return pw
}

package view

import (
	"context"

	"github.com/cps-extender/cps-extender/extender/gang"

	"github.com/cps-extender/cps-extender/extender/config"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The PodGroup kinds the extender reads.
var (
	volcanoPodGroups      = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	coschedulingPodGroups = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	// workloadPodGroups are Kubernetes' own (the Workload API, GenericWorkload, beta in 1.37).
	workloadPodGroups = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}
)

// podGroupSources keeps an informer per PodGroup kind whose CRD the cluster serves. A kind
// that is absent (or switched off) is simply not consulted.
type podGroupSources struct {
	log      *zap.Logger
	client   kubernetes.Interface
	factory  dynamicinformer.DynamicSharedInformerFactory
	wanted   map[string]schema.GroupVersionResource
	handler  cache.ResourceEventHandler
	indexers map[string]cache.Indexer
}

func newPodGroupSources(log *zap.Logger, client kubernetes.Interface, dyn dynamic.Interface, g config.GangConfig, h cache.ResourceEventHandler) *podGroupSources {
	s := &podGroupSources{log: log, client: client, handler: h, wanted: map[string]schema.GroupVersionResource{}, indexers: map[string]cache.Indexer{}}
	if dyn == nil {
		return s
	}
	s.factory = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	if g.Volcano {
		s.wanted[gang.SourceVolcano] = volcanoPodGroups
	}
	if g.Coscheduling {
		s.wanted[gang.SourceCoscheduling] = coschedulingPodGroups
	}
	if g.Workload {
		s.wanted[gang.SourceWorkload] = workloadPodGroups
	}
	return s
}

// start asks discovery which PodGroup kinds are served, starts informers for those and
// returns their sync functions by source. It must run before lookups.
func (s *podGroupSources) start(ctx context.Context) map[string]cache.InformerSynced {
	if s.factory == nil {
		return nil
	}
	synced := map[string]cache.InformerSynced{}
	for source, gvr := range s.wanted {
		if !s.served(gvr) {
			s.log.Info("PodGroup source off: its CRD is not served by the cluster", zap.String("source", source), zap.String("resource", gvr.String()))
			continue
		}
		inf := s.factory.ForResource(gvr).Informer()
		if _, err := inf.AddEventHandler(s.handler); err != nil {
			s.log.Error("adding a PodGroup event handler", zap.Error(err))
		}
		s.indexers[source] = inf.GetIndexer()
		synced[source] = inf.HasSynced
		s.log.Info("PodGroup source on", zap.String("source", source), zap.String("resource", gvr.String()))
	}
	s.factory.Start(ctx.Done())
	return synced
}

func (s *podGroupSources) served(gvr schema.GroupVersionResource) bool {
	list, err := s.client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}

func (s *podGroupSources) shutdown() {
	if s.factory != nil {
		s.factory.Shutdown()
	}
}

// lookup reads a PodGroup's minimum, creation time and annotations; of a Workload API
// PodGroup, its gang's minCount (1 for a basic, non-gang policy) and its first topology
// constraint's key.
func (s *podGroupSources) lookup(source, namespace, name string) (gang.PodGroupInfo, bool) {
	idx, ok := s.indexers[source]
	if !ok {
		return gang.PodGroupInfo{}, false
	}
	obj, exists, err := idx.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return gang.PodGroupInfo{}, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return gang.PodGroupInfo{}, false
	}
	info := gang.PodGroupInfo{Created: u.GetCreationTimestamp().Time, Annotations: u.GetAnnotations()}
	if source != gang.SourceWorkload {
		minMember, _, _ := unstructured.NestedInt64(u.Object, "spec", "minMember")
		info.MinMember = int(minMember)
		return info, true
	}
	info.MinMember = 1
	if n, found, _ := unstructured.NestedInt64(u.Object, "spec", "schedulingPolicy", "gang", "minCount"); found {
		info.MinMember = int(n)
	}
	constraints, _, _ := unstructured.NestedSlice(u.Object, "spec", "schedulingConstraints", "topology")
	for _, c := range constraints {
		if m, ok := c.(map[string]any); ok {
			if key, ok := m["key"].(string); ok && key != "" {
				info.RequiredTopology = key
				break
			}
		}
	}
	return info, true
}

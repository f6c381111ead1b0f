# One local.mk per plugin folder.

CAPTURE_CHECK_SOURCES = plugins/common/capture_check.c plugins/common/capture_check.h
GRAPH_HOLD_SOURCES = plugins/common/graph_hold.c plugins/common/graph_hold.h
GRAPH_PARK_SOURCES = plugins/common/graph_park.c plugins/common/graph_park.h $(GRAPH_HOLD_SOURCES)
DIRECT_RESOURCE_SOURCES = plugins/common/direct_resource.c plugins/common/direct_resource.h $(CAPTURE_CHECK_SOURCES)
SPIN_LOCK_SOURCES = plugins/common/spin_lock.c plugins/common/spin_lock.h
DEVICE_DEFAULT_SOURCES = plugins/common/device_default.c plugins/common/device_default.h
RESOURCE_LABEL_SOURCES = plugins/common/resource_label.c plugins/common/resource_label.h
PTR_MAP_SOURCES = plugins/common/ptr_map.c plugins/common/ptr_map.h plugins/common/ptr_set.h
POOL_VIEW_SOURCES = plugins/common/pool_view.c plugins/common/pool_view.h
FORK_GUARDS_SOURCES = plugins/common/fork_guards.c plugins/common/fork_guards.h
include plugins/cuda/local.mk
include plugins/host/local.mk
include plugins/managed/local.mk
include plugins/pinned/local.mk
include plugins/template/local.mk
include plugins/pool/local.mk
include plugins/arena/local.mk
include plugins/async/local.mk
include plugins/logging/local.mk
include plugins/statistics/local.mk
include plugins/tracking/local.mk
include plugins/limiting/local.mk
include plugins/binning/local.mk
include plugins/fixed_size/local.mk
include plugins/aligned/local.mk
include plugins/failure_callback/local.mk
include plugins/prefetch/local.mk
include plugins/callback/local.mk
include plugins/cuda_async_view/local.mk
include plugins/async_managed/local.mk
include plugins/system/local.mk
include plugins/sam_headroom/local.mk

# plugins/failure_callback: not built yet

# plugins/limiting: not built yet

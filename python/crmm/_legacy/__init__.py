"""Modules of older RMM releases that the newest no longer has, for `import rmm` under an older
`rmm_version` only (crmm._rmm_alias maps their RMM names here while that release has them)."""

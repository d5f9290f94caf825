package main

// defaultBackend runs nvidia-smi.exe: NVML's loader is Linux's.
const defaultBackend = "nvidia-smi"

export * from './init.js';
export * from './ops.js';
export * from './wasm-kernels.js';
export * from './tensorflow.js';
export { backendHome, nativeBackendBase, setupHint, type BackendHome, type BackendHomeInputs, type BackendHomeRule, type NativeBackendName } from './setup-home.js';
export { configureTorch, describeTorch, holdInBfloat16, samplesOnDevice, torchBackend, torchBf16SavedBytes, torchCudaDevices, torchDevice, torchDeviceMemoryBytes, torchGpuPeakBytes, torchOnGpu, torchInstalled, torchSetupDir, TORCH_KERNEL_NAMES, type TorchOptions } from './torch/index.js';

// comlrl's torch addon: a table of at::Tensor handles and a few generic entry points.
//
// Which ATen operator implements which tfjs kernel is decided in TypeScript
// (src/backend/torch/kernels.ts). This file only
//   - resolves an operator by name once (`resolve`) and calls it with arguments converted by the
//     operator's own schema (`call`), so adding a kernel never touches C++;
//   - moves bytes in and out of tensors (`upload`, `download`) and frees handles (`free`);
//   - exposes the runtime switches tfjs cannot express (`runtime`): threads, seeds, TF32,
//     determinism, device synchronisation and memory statistics;
//   - runs RMSNorm and its gradient on CPU as plain loops (`rmsNorm`, `rmsNormGrad`), where ATen
//     has only a composition of element-wise kernels.
// Compiled on the user's machine by scripts/setup-torch.mjs against the torch it finds.

#include <node_api.h>

#include <ATen/ATen.h>
#include <ATen/DeviceAccelerator.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <string>
#include <vector>

namespace {

// ---- handle table ---------------------------------------------------------------------------

std::vector<at::Tensor> table;      // slot -> tensor (undefined when free)
std::vector<uint32_t> free_slots;   // reusable slots
size_t live = 0;

uint32_t put(at::Tensor t) {
  live++;
  if (!free_slots.empty()) {
    uint32_t slot = free_slots.back();
    free_slots.pop_back();
    table[slot] = std::move(t);
    return slot;
  }
  table.push_back(std::move(t));
  return static_cast<uint32_t>(table.size() - 1);
}

const at::Tensor& get(uint32_t slot) {
  if (slot >= table.size() || !table[slot].defined()) throw std::runtime_error("comlrl_torch: unknown tensor handle " + std::to_string(slot));
  return table[slot];
}

std::vector<c10::OperatorHandle> ops;  // resolved operators, indexed by `resolve`'s answer

// ---- N-API helpers --------------------------------------------------------------------------

struct JsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(napi_env env, napi_status s, const char* what) {
  if (s != napi_ok) throw JsError(std::string("comlrl_torch: N-API call failed: ") + what);
}

napi_valuetype type_of(napi_env env, napi_value v) {
  napi_valuetype t;
  check(env, napi_typeof(env, v, &t), "typeof");
  return t;
}

double num(napi_env env, napi_value v) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok) throw JsError("comlrl_torch: expected a number");
  return d;
}

std::string str(napi_env env, napi_value v) {
  size_t n = 0;
  if (napi_get_value_string_utf8(env, v, nullptr, 0, &n) != napi_ok) throw JsError("comlrl_torch: expected a string");
  std::string s(n, '\0');
  check(env, napi_get_value_string_utf8(env, v, s.data(), n + 1, &n), "string");
  return s;
}

uint32_t array_length(napi_env env, napi_value v) {
  bool is_array = false;
  check(env, napi_is_array(env, v, &is_array), "is_array");
  if (!is_array) throw JsError("comlrl_torch: expected an array");
  uint32_t n;
  check(env, napi_get_array_length(env, v, &n), "array length");
  return n;
}

napi_value element(napi_env env, napi_value arr, uint32_t i) {
  napi_value v;
  check(env, napi_get_element(env, arr, i, &v), "get element");
  return v;
}

napi_value make_number(napi_env env, double d) {
  napi_value v;
  check(env, napi_create_double(env, d, &v), "create number");
  return v;
}

bool is_nullish(napi_env env, napi_value v) {
  napi_valuetype t = type_of(env, v);
  return t == napi_null || t == napi_undefined;
}

int64_t to_int(napi_env env, napi_value v) {
  if (type_of(env, v) == napi_bigint) {
    int64_t i;
    bool lossless;
    check(env, napi_get_value_bigint_int64(env, v, &i, &lossless), "bigint");
    return i;
  }
  return static_cast<int64_t>(num(env, v));
}

std::vector<int64_t> int_list(napi_env env, napi_value v) {
  uint32_t n = array_length(env, v);
  std::vector<int64_t> out(n);
  for (uint32_t i = 0; i < n; i++) out[i] = to_int(env, element(env, v, i));
  return out;
}

// ---- schema-driven argument conversion -------------------------------------------------------

// A JS value as the IValue an argument of type `type` takes. Tensors are handles (numbers);
// Scalars are doubles, BigInts (int64) or booleans; ScalarType, Layout and MemoryFormat are their
// enum codes; Device is a string such as "cuda:0".
c10::IValue to_ivalue(napi_env env, napi_value v, const c10::TypePtr& type) {
  using K = c10::TypeKind;
  switch (type->kind()) {
    case K::OptionalType:
      if (is_nullish(env, v)) return c10::IValue();
      return to_ivalue(env, v, type->castRaw<c10::OptionalType>()->getElementType());
    case K::TensorType:
      return get(static_cast<uint32_t>(num(env, v)));
    case K::IntType:
    case K::SymIntType:
    case K::ScalarTypeType:
    case K::LayoutType:
    case K::MemoryFormatType:
      return to_int(env, v);
    case K::FloatType:
      return num(env, v);
    case K::BoolType: {
      bool b;
      check(env, napi_get_value_bool(env, v, &b), "bool");
      return b;
    }
    case K::NumberType: {  // at::Scalar
      napi_valuetype t = type_of(env, v);
      if (t == napi_bigint) return to_int(env, v);
      if (t == napi_boolean) {
        bool b;
        check(env, napi_get_value_bool(env, v, &b), "bool");
        return b;
      }
      return num(env, v);
    }
    case K::StringType:
      return str(env, v);
    case K::DeviceObjType:
      return c10::Device(str(env, v));
    case K::ListType: {
      const c10::TypePtr& el = type->castRaw<c10::ListType>()->getElementType();
      uint32_t n = array_length(env, v);
      switch (el->kind()) {
        case K::IntType:
        case K::SymIntType:
          return int_list(env, v);
        case K::TensorType: {
          c10::List<at::Tensor> l;
          l.reserve(n);
          for (uint32_t i = 0; i < n; i++) l.push_back(get(static_cast<uint32_t>(num(env, element(env, v, i)))));
          return l;
        }
        case K::OptionalType: {  // Tensor?[] (index, index_put)
          c10::List<std::optional<at::Tensor>> l;
          l.reserve(n);
          for (uint32_t i = 0; i < n; i++) {
            napi_value e = element(env, v, i);
            if (is_nullish(env, e)) l.push_back(std::nullopt);
            else l.push_back(get(static_cast<uint32_t>(num(env, e))));
          }
          return l;
        }
        case K::FloatType: {
          std::vector<double> d(n);
          for (uint32_t i = 0; i < n; i++) d[i] = num(env, element(env, v, i));
          return d;
        }
        case K::BoolType: {
          c10::List<bool> l;
          for (uint32_t i = 0; i < n; i++) {
            bool b;
            check(env, napi_get_value_bool(env, element(env, v, i), &b), "bool");
            l.push_back(b);
          }
          return l;
        }
        default:
          break;
      }
      throw JsError("comlrl_torch: unsupported list argument type " + type->str());
    }
    default:
      throw JsError("comlrl_torch: unsupported argument type " + type->str());
  }
}

napi_value from_ivalue(napi_env env, const c10::IValue& v) {
  if (v.isTensor()) return make_number(env, put(v.toTensor()));
  if (v.isTensorList()) {
    auto list = v.toTensorList();
    napi_value arr;
    check(env, napi_create_array_with_length(env, list.size(), &arr), "array");
    for (size_t i = 0; i < list.size(); i++) check(env, napi_set_element(env, arr, i, make_number(env, put(list.get(i)))), "set element");
    return arr;
  }
  if (v.isInt()) return make_number(env, static_cast<double>(v.toInt()));
  if (v.isDouble()) return make_number(env, v.toDouble());
  if (v.isBool()) {
    napi_value b;
    check(env, napi_get_boolean(env, v.toBool(), &b), "bool");
    return b;
  }
  if (v.isNone()) {
    napi_value n;
    check(env, napi_get_null(env, &n), "null");
    return n;
  }
  throw JsError(std::string("comlrl_torch: unsupported result type ") + v.tagKind());
}

// ---- entry points ---------------------------------------------------------------------------

template <typename F>
napi_value guarded(napi_env env, F&& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    napi_throw_error(env, "TORCH_ERROR", e.what_without_backtrace());
  } catch (const std::exception& e) {
    napi_throw_error(env, "TORCH_ERROR", e.what());
  }
  return nullptr;
}

std::vector<napi_value> args_of(napi_env env, napi_callback_info info, size_t want) {
  std::vector<napi_value> argv(want);
  size_t argc = want;
  check(env, napi_get_cb_info(env, info, &argc, argv.data(), nullptr, nullptr), "arguments");
  if (argc < want) throw JsError("comlrl_torch: expected " + std::to_string(want) + " arguments");
  return argv;
}

// resolve(name, overload) -> operator index. Throws naming the operator when torch lacks it.
napi_value Resolve(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 2);
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(str(env, a[0]).c_str(), str(env, a[1]).c_str());
    ops.push_back(handle);
    return make_number(env, static_cast<double>(ops.size() - 1));
  });
}

// call(op, args[]) -> handle | value | array of them. Missing trailing arguments take the
// schema's defaults; results are converted as in from_ivalue.
napi_value Call(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 2);
    size_t index = static_cast<size_t>(num(env, a[0]));
    if (index >= ops.size()) throw JsError("comlrl_torch: unknown operator index");
    const c10::OperatorHandle& op = ops[index];
    const auto& schema = op.schema();
    const auto& params = schema.arguments();
    uint32_t given = array_length(env, a[1]);
    if (given > params.size()) throw JsError("comlrl_torch: too many arguments for " + schema.name());
    torch::jit::Stack stack;
    stack.reserve(params.size());
    for (size_t i = 0; i < params.size(); i++) {
      napi_value v = i < given ? element(env, a[1], static_cast<uint32_t>(i)) : nullptr;
      if (v == nullptr || type_of(env, v) == napi_undefined) {
        if (!params[i].default_value()) throw JsError("comlrl_torch: " + schema.name() + " needs argument '" + params[i].name() + "'");
        stack.push_back(*params[i].default_value());
      } else {
        stack.push_back(to_ivalue(env, v, params[i].type()));
      }
    }
    op.callBoxed(stack);
    if (stack.size() == 1) return from_ivalue(env, stack[0]);
    napi_value arr;
    check(env, napi_create_array_with_length(env, stack.size(), &arr), "array");
    for (size_t i = 0; i < stack.size(); i++) check(env, napi_set_element(env, arr, i, from_ivalue(env, stack[i])), "set element");
    return arr;
  });
}

// upload(typedArray, shape[], device) -> handle. Float32Array -> float32, Int32Array -> int32,
// Uint8Array -> bool; the bytes are copied.
napi_value Upload(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 3);
    napi_typedarray_type kind;
    size_t length;
    void* data;
    napi_value buffer;
    size_t offset;
    if (napi_get_typedarray_info(env, a[0], &kind, &length, &data, &buffer, &offset) != napi_ok) throw JsError("comlrl_torch: upload needs a typed array");
    at::ScalarType dtype;
    size_t width;
    switch (kind) {
      case napi_float32_array: dtype = at::kFloat; width = 4; break;
      case napi_int32_array: dtype = at::kInt; width = 4; break;
      case napi_uint8_array: dtype = at::kBool; width = 1; break;
      default: throw JsError("comlrl_torch: upload takes Float32Array, Int32Array or Uint8Array");
    }
    std::vector<int64_t> shape = int_list(env, a[1]);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (static_cast<size_t>(n) != length) throw JsError("comlrl_torch: upload: " + std::to_string(length) + " values for a shape of " + std::to_string(n));
    c10::Device device(str(env, a[2]));
    auto options = at::TensorOptions().dtype(dtype);
    if (!device.is_cpu() && n == 1) {
      // A scalar constant: filled on the device, no host-to-device copy to wait for.
      at::Scalar value = dtype == at::kFloat ? at::Scalar(*static_cast<float*>(data))
                         : dtype == at::kInt ? at::Scalar(static_cast<int64_t>(*static_cast<int32_t*>(data)))
                                             : at::Scalar(*static_cast<uint8_t*>(data) != 0);
      return make_number(env, put(at::full(shape, value, options.device(device))));
    }
    // Off CPU, staged in pinned memory so the copy runs asynchronously (torch's host allocator
    // keeps the staging buffer until the copy has finished).
    at::Tensor t = at::empty(shape, device.is_cpu() ? options : options.pinned_memory(true));
    if (n > 0) std::memcpy(t.data_ptr(), data, length * width);
    if (!device.is_cpu()) t = t.to(device, /*non_blocking=*/true);
    return make_number(env, put(std::move(t)));
  });
}

// download(handle) -> a new typed array with the values on the host: float dtypes as
// Float32Array, integer dtypes as Int32Array, bool as Uint8Array.
napi_value Download(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 1);
    at::Tensor t = get(static_cast<uint32_t>(num(env, a[0])));
    at::ScalarType want = t.scalar_type() == at::kBool ? at::kBool : at::isFloatingType(t.scalar_type()) ? at::kFloat : at::kInt;
    t = t.to(at::kCPU, want).contiguous();
    size_t n = static_cast<size_t>(t.numel());
    size_t width = want == at::kBool ? 1 : 4;
    void* out;
    napi_value buffer;
    check(env, napi_create_arraybuffer(env, n * width, &out, &buffer), "arraybuffer");
    if (n > 0) std::memcpy(out, t.data_ptr(), n * width);
    napi_value arr;
    napi_typedarray_type kind = want == at::kBool ? napi_uint8_array : want == at::kFloat ? napi_float32_array : napi_int32_array;
    check(env, napi_create_typedarray(env, kind, n, buffer, 0, &arr), "typedarray");
    return arr;
  });
}

// free(handle)
napi_value Free(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 1);
    uint32_t slot = static_cast<uint32_t>(num(env, a[0]));
    get(slot);
    table[slot] = at::Tensor();
    free_slots.push_back(slot);
    live--;
    return static_cast<napi_value>(nullptr);
  });
}

// meta(handle) -> [scalar type code, device string, ...shape]
napi_value Meta(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 1);
    const at::Tensor& t = get(static_cast<uint32_t>(num(env, a[0])));
    napi_value arr;
    check(env, napi_create_array_with_length(env, t.dim() + 2, &arr), "array");
    check(env, napi_set_element(env, arr, 0, make_number(env, static_cast<double>(t.scalar_type()))), "set");
    napi_value dev;
    std::string d = t.device().str();
    check(env, napi_create_string_utf8(env, d.c_str(), d.size(), &dev), "string");
    check(env, napi_set_element(env, arr, 1, dev), "set");
    for (int64_t i = 0; i < t.dim(); i++) check(env, napi_set_element(env, arr, i + 2, make_number(env, static_cast<double>(t.size(i)))), "set");
    return arr;
  });
}

// runtime(command, value) -> number | string. The switches and facts tfjs has no op for.
napi_value Runtime(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto a = args_of(env, info, 2);
    std::string cmd = str(env, a[0]);
    auto string_value = [&](const std::string& s) {
      napi_value v;
      check(env, napi_create_string_utf8(env, s.c_str(), s.size(), &v), "string");
      return v;
    };
    auto accelerator = at::accelerator::getAccelerator(false);
    bool cuda = accelerator.has_value() && *accelerator == c10::DeviceType::CUDA && at::accelerator::deviceCount() > 0;
    // The allocator's statistics need CUDA initialised (they fail before the first CUDA tensor).
    if (cuda) at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
    if (cmd == "version") return string_value(TORCH_VERSION);
    if (cmd == "live") return make_number(env, static_cast<double>(live));
    if (cmd == "cuda_devices") return make_number(env, cuda ? at::accelerator::deviceCount() : 0);
    if (cmd == "get_threads") return make_number(env, at::get_num_threads());
    if (cmd == "set_threads") {
      at::set_num_threads(static_cast<int>(num(env, a[1])));
      return make_number(env, at::get_num_threads());
    }
    if (cmd == "seed") {
      at::manual_seed(static_cast<uint64_t>(num(env, a[1])));
      return make_number(env, 0);
    }
    if (cmd == "tf32") {
      bool on = num(env, a[1]) != 0;
      at::globalContext().setAllowTF32CuBLAS(on);
      at::globalContext().setAllowTF32CuDNN(on);
      return make_number(env, on ? 1 : 0);
    }
    if (cmd == "deterministic") {
      at::globalContext().setDeterministicAlgorithms(num(env, a[1]) != 0, false);
      return make_number(env, 0);
    }
    // The rest take a CUDA device index and are no-ops without CUDA.
    auto index = static_cast<c10::DeviceIndex>(num(env, a[1]));
    if (cmd == "sync") {
      if (cuda) at::accelerator::synchronizeDevice(index);
      return make_number(env, 0);
    }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
    if (cmd == "allocated" || cmd == "peak" || cmd == "reserved") {
      if (!cuda) return make_number(env, 0);
      auto stats = at::accelerator::getDeviceStats(index);
      const auto& s = cmd == "reserved" ? stats.reserved_bytes[0] : stats.allocated_bytes[0];
      return make_number(env, static_cast<double>(cmd == "peak" ? s.peak : s.current));
    }
    if (cmd == "reset_peak") {
      if (cuda) at::accelerator::resetPeakStats(index);
      return make_number(env, 0);
    }
    if (cmd == "empty_cache") {
      if (cuda) at::accelerator::emptyCache();
      return make_number(env, 0);
    }
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 10)
    if (cmd == "device_memory") {  // total bytes of the device
      if (!cuda) return make_number(env, 0);
      return make_number(env, static_cast<double>(at::accelerator::getMemoryInfo(index).second));
    }
#endif
    // Older torch: no device-generic memory API; answer 0 (unknown), which callers treat as such.
    if (cmd == "allocated" || cmd == "peak" || cmd == "reserved" || cmd == "reset_peak" || cmd == "empty_cache" || cmd == "device_memory") return make_number(env, 0);
    throw JsError("comlrl_torch: unknown runtime command '" + cmd + "'");
  });
}

// ---- RMSNorm on CPU ---------------------------------------------------------------------------
//
// y = x·r·w per row with r = 1/sqrt(mean(x²) + eps), and its gradients, as single passes over
// float32 rows. ATen's `_fused_rms_norm` is a composition on CPU (six element-wise kernels, 50–90 µs
// each even at 4 rows) and has no CPU backward; these loops read each row once or twice. Sums use
// 16 partial accumulators, so the compiler can vectorise them without reassociating.

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COMLRL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define COMLRL_CLONES
#endif

COMLRL_CLONES float sum_of_products(const float* a, const float* b, int64_t n) {
  float acc[16] = {0};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; k++) acc[k] += a[j + k] * b[j + k];
  float s = 0;
  for (int k = 0; k < 16; k++) s += acc[k];
  for (; j < n; j++) s += a[j] * b[j];
  return s;
}

COMLRL_CLONES void rms_rows(const float* x, const float* w, float* y, float* rstd, int64_t begin, int64_t end, int64_t h, float eps) {
  for (int64_t i = begin; i < end; i++) {
    const float* xi = x + i * h;
    float* yi = y + i * h;
    float r = 1.0f / std::sqrt(sum_of_products(xi, xi, h) / static_cast<float>(h) + eps);
    rstd[i] = r;
    for (int64_t j = 0; j < h; j++) yi[j] = xi[j] * r * w[j];
  }
}

// ∂x = r·(g − x̂·mean(g ⊙ x̂)) with g = dy ⊙ w and x̂ = x·r.
COMLRL_CLONES void rms_grad_x_rows(const float* dy, const float* x, const float* w, const float* rstd, float* dx, int64_t begin, int64_t end, int64_t h) {
  for (int64_t i = begin; i < end; i++) {
    const float* dyi = dy + i * h;
    const float* xi = x + i * h;
    float* dxi = dx + i * h;
    float r = rstd[i];
    float acc[16] = {0};
    int64_t j = 0;
    for (; j + 16 <= h; j += 16)
      for (int k = 0; k < 16; k++) acc[k] += dyi[j + k] * w[j + k] * xi[j + k];
    float gx = 0;
    for (int k = 0; k < 16; k++) gx += acc[k];
    for (; j < h; j++) gx += dyi[j] * w[j] * xi[j];
    float m = gx * r / static_cast<float>(h);  // mean(g ⊙ x̂)
    for (j = 0; j < h; j++) dxi[j] = r * (dyi[j] * w[j] - xi[j] * r * m);
  }
}

// ∂w[j] = Σ_rows dy ⊙ x̂, for columns [c0, c1).
COMLRL_CLONES void rms_grad_w_cols(const float* dy, const float* x, const float* rstd, float* dw, int64_t rows, int64_t h, int64_t c0, int64_t c1) {
  for (int64_t j = c0; j < c1; j++) dw[j] = 0;
  for (int64_t i = 0; i < rows; i++) {
    const float* dyi = dy + i * h;
    const float* xi = x + i * h;
    float r = rstd[i];
    for (int64_t j = c0; j < c1; j++) dw[j] += dyi[j] * (xi[j] * r);
  }
}

at::Tensor float_cpu(const at::Tensor& t, const char* what) {
  if (!t.device().is_cpu() || t.scalar_type() != at::kFloat) throw JsError(std::string("comlrl_torch: rms norm needs float32 CPU tensors (") + what + ")");
  return t.contiguous();
}

// Rows of at least this many elements in all go to the thread pool; fewer run on the caller.
constexpr int64_t kRowGrain = 1 << 15;

// rmsNorm(x, w, eps) -> [y, rstd]: rstd has x's shape with a last axis of 1.
napi_value RmsNorm(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 3);
    at::Tensor x = float_cpu(get(static_cast<uint32_t>(num(env, a[0]))), "x");
    at::Tensor w = float_cpu(get(static_cast<uint32_t>(num(env, a[1]))), "weight");
    float eps = static_cast<float>(num(env, a[2]));
    int64_t h = x.size(-1);
    if (w.numel() != h) throw JsError("comlrl_torch: rms norm weight does not match the last axis");
    int64_t rows = h == 0 ? 0 : x.numel() / h;
    auto rshape = x.sizes().vec();
    rshape.back() = 1;
    at::Tensor y = at::empty_like(x);
    at::Tensor r = at::empty(rshape, x.options());
    const float *px = x.data_ptr<float>(), *pw = w.data_ptr<float>();
    float *py = y.data_ptr<float>(), *pr = r.data_ptr<float>();
    at::parallel_for(0, rows, std::max<int64_t>(1, kRowGrain / std::max<int64_t>(h, 1)), [&](int64_t b, int64_t e) { rms_rows(px, pw, py, pr, b, e, h, eps); });
    napi_value arr;
    check(env, napi_create_array_with_length(env, 2, &arr), "array");
    check(env, napi_set_element(env, arr, 0, make_number(env, put(std::move(y)))), "set element");
    check(env, napi_set_element(env, arr, 1, make_number(env, put(std::move(r)))), "set element");
    return arr;
  });
}

// rmsNormGrad(dy, x, w, rstd, wrtWeight) -> ∂x, or ∂w when wrtWeight.
napi_value RmsNormGrad(napi_env env, napi_callback_info info) {
  return guarded(env, [&] {
    auto a = args_of(env, info, 5);
    at::Tensor dy = float_cpu(get(static_cast<uint32_t>(num(env, a[0]))), "dy");
    at::Tensor x = float_cpu(get(static_cast<uint32_t>(num(env, a[1]))), "x");
    at::Tensor w = float_cpu(get(static_cast<uint32_t>(num(env, a[2]))), "weight");
    at::Tensor r = float_cpu(get(static_cast<uint32_t>(num(env, a[3]))), "rstd");
    bool wrt_w = false;
    check(env, napi_get_value_bool(env, a[4], &wrt_w), "bool");
    int64_t h = x.size(-1);
    int64_t rows = h == 0 ? 0 : x.numel() / h;
    if (dy.sizes() != x.sizes() || w.numel() != h || r.numel() != rows) throw JsError("comlrl_torch: rms norm gradient: shapes do not match");
    const float *pdy = dy.data_ptr<float>(), *px = x.data_ptr<float>(), *pw = w.data_ptr<float>(), *pr = r.data_ptr<float>();
    at::Tensor out;
    if (wrt_w) {
      out = at::empty({h}, x.options());
      float* pdw = out.data_ptr<float>();
      // Columns in blocks of 16 (one cache line of each row), split across threads once rows × 16 is large.
      int64_t blocks = (h + 15) / 16;
      at::parallel_for(0, blocks, std::max<int64_t>(1, kRowGrain / std::max<int64_t>(16 * rows, 1)), [&](int64_t b, int64_t e) {
        rms_grad_w_cols(pdy, px, pr, pdw, rows, h, b * 16, std::min(h, e * 16));
      });
    } else {
      out = at::empty_like(x);
      float* pdx = out.data_ptr<float>();
      at::parallel_for(0, rows, std::max<int64_t>(1, kRowGrain / std::max<int64_t>(h, 1)), [&](int64_t b, int64_t e) { rms_grad_x_rows(pdy, px, pw, pr, pdx, b, e, h); });
    }
    return make_number(env, put(std::move(out)));
  });
}

// glibc returns each freed block above its (adaptive) mmap threshold to the system and trims the
// heap top above 128 KiB, so a training step's activations are fresh pages every step: ~9,000 page
// faults per step of the bench model, against ~2,700 for PyTorch from Python. Blocks up to 32 MiB
// from the heap and a 256 MiB trim threshold keep them mapped. Environment settings win.
void keep_freed_memory_mapped() {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr && std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }
#endif
}

napi_value Init(napi_env env, napi_value exports) {
  keep_freed_memory_mapped();
  napi_property_descriptor props[] = {
      {"resolve", nullptr, Resolve, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"call", nullptr, Call, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"upload", nullptr, Upload, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"download", nullptr, Download, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"free", nullptr, Free, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"meta", nullptr, Meta, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"runtime", nullptr, Runtime, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"rmsNorm", nullptr, RmsNorm, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"rmsNormGrad", nullptr, RmsNormGrad, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)

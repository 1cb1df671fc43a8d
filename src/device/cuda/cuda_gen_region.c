// A region (reduce/scatter/sort body) as a CUDA __device__ function over
// scalars in comp types (iron_cuda_gen_type). CUDA kernels never call back
// into the runtime: the body's ops are translated one by one.
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/half.h"
#include "device/cuda/cuda_codegen.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/cuda_ops_gen.h"

// The C name of a value used inside `blk`: block arguments are a<i>, op
// results t<op>_<result>.
static bool value_name(const iron_ir_block_t *blk, const iron_ir_value_t *v,
                       char *buf, size_t cap) {
  if (!v->def_op) {
    if (v->def_block != blk && v->def_block) return false;
    snprintf(buf, cap, "a%u", v->index);
    return true;
  }
  for (uint32_t i = 0; i < blk->num_ops; ++i)
    if (blk->ops[i] == v->def_op) {
      snprintf(buf, cap, "t%u_%u", i, v->index);
      return true;
    }
  return false;
}

static bool scalar_type(const iron_ir_type_t *t) {
  return t && t->kind == IRON_TYPE_TENSOR && t->rank == 0;
}

// A literal of a rank-0 dense constant, as an expression of its comp type.
static iron_status_t emit_constant(iron_cuda_text_t *t, const char *dst,
                                   const iron_ir_op_t *op) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
  if (!a || a->kind != IRON_ATTR_DENSE || !a->dense.data)
    return iron_ir_op_unimplemented(op, "in a cuda region (non-dense value)");
  iron_dtype_t dt = a->dense.type->dtype;
  const void *p = a->dense.data;
  iron_cuda_gen_type_t ct = iron_cuda_gen_type_narrow(dt);
  switch (dt) {
    case IRON_DTYPE_PRED:
    case IRON_DTYPE_U8:
      iron_cuda_text_printf(t, "%s %s = %u;\n", ct.comp, dst,
                            (unsigned)*(const uint8_t *)p);
      break;
    case IRON_DTYPE_S8:
      iron_cuda_text_printf(t, "%s %s = %d;\n", ct.comp, dst,
                            (int)*(const int8_t *)p);
      break;
    case IRON_DTYPE_S16:
      iron_cuda_text_printf(t, "%s %s = %d;\n", ct.comp, dst,
                            (int)*(const int16_t *)p);
      break;
    case IRON_DTYPE_U16:
      iron_cuda_text_printf(t, "%s %s = %u;\n", ct.comp, dst,
                            (unsigned)*(const uint16_t *)p);
      break;
    case IRON_DTYPE_S32:
      iron_cuda_text_printf(t, "%s %s = (iop_s32)%" PRId32 ";\n", ct.comp, dst,
                            *(const int32_t *)p);
      break;
    case IRON_DTYPE_U32:
      iron_cuda_text_printf(t, "%s %s = %" PRIu32 "u;\n", ct.comp, dst,
                            *(const uint32_t *)p);
      break;
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U64: {
      uint64_t u;
      memcpy(&u, p, 8);
      iron_cuda_text_printf(t, "%s %s = (%s)0x%" PRIx64 "ull;\n", ct.comp, dst,
                            ct.comp, u);
      break;
    }
    case IRON_DTYPE_F16:
    case IRON_DTYPE_BF16:
      iron_cuda_text_printf(t, "%s %s = %s((iop_u16)0x%x);\n", ct.comp, dst,
                            ct.ld, (unsigned)*(const uint16_t *)p);
      break;
    case IRON_DTYPE_F32: {
      uint32_t u;
      memcpy(&u, p, 4);
      iron_cuda_text_printf(t, "float %s = __uint_as_float(0x%" PRIx32 "u);\n",
                            dst, u);
      break;
    }
    case IRON_DTYPE_F64: {
      uint64_t u;
      memcpy(&u, p, 8);
      iron_cuda_text_printf(
          t, "double %s = __longlong_as_double((iop_s64)0x%" PRIx64 "ull);\n",
          dst, u);
      break;
    }
    case IRON_DTYPE_C64: {
      uint32_t u[2];
      memcpy(u, p, 8);
      iron_cuda_text_printf(t,
                            "iop_c64 %s; %s.re = __uint_as_float(0x%" PRIx32
                            "u); %s.im = __uint_as_float(0x%" PRIx32 "u);\n",
                            dst, dst, u[0], dst, u[1]);
      break;
    }
    case IRON_DTYPE_C128: {
      uint64_t u[2];
      memcpy(u, p, 16);
      iron_cuda_text_printf(
          t,
          "iop_c128 %s; %s.re = __longlong_as_double((iop_s64)0x%" PRIx64
          "ull); %s.im = __longlong_as_double((iop_s64)0x%" PRIx64 "ull);\n",
          dst, dst, u[0], dst, u[1]);
      break;
    }
    default:
      // Narrow dtypes: the byte, decoded (exact in the comp type).
      if (ct.is_narrow) {
        iron_cuda_text_printf(t, "%s %s = %s((iop_u8)0x%x);\n", ct.comp, dst,
                              ct.ld, (unsigned)*(const uint8_t *)p);
        break;
      }
      return iron_ir_op_unimplemented(op, "in a cuda region for dtype %s",
                                      iron_dtype_name(dt));
  }
  return IRON_OK;
}

// A rank-0 constant defined outside the region (jax's lowering shares one
// constant between a comparator's uses and the enclosing function):
// generated in place under `name`.
static bool outer_constant(const iron_ir_value_t *v) {
  return v->def_op && v->def_op->kind == IRON_OP_CONSTANT &&
         scalar_type(v->type);
}

static const char *cmp_op(int32_t dir) {
  switch (dir) {
    case IRON_CMP_EQ: return "==";
    case IRON_CMP_NE: return "!=";
    case IRON_CMP_GE: return ">=";
    case IRON_CMP_GT: return ">";
    case IRON_CMP_LE: return "<=";
    case IRON_CMP_LT: return "<";
    default: return NULL;
  }
}

// One op of a region with a complex operand or result. Arithmetic follows
// the host's reduce/scatter loops (reduce_fast.c: the plain product
// formula, no fma; NVRTC runs with -fmad=false); compares as the host's
// element-wise complex compare (EQ/NE on both parts).
static iron_status_t emit_complex_op(iron_cuda_text_t *t,
                                     const iron_ir_op_t *op, const char *dst,
                                     iron_cuda_gen_type_t rt,
                                     iron_cuda_gen_type_t ot, const char *a,
                                     const char *b, const char *c) {
  switch (op->kind) {
    case IRON_OP_CONSTANT:
      return emit_constant(t, dst, op);
    case IRON_OP_ADD:
    case IRON_OP_SUBTRACT:
    case IRON_OP_MULTIPLY:
      if (!rt.is_complex || !ot.is_complex) break;
      iron_cuda_text_printf(t, "%s %s = %s(%s, %s);\n", rt.comp, dst,
                            op->kind == IRON_OP_ADD        ? "iop_cadd"
                            : op->kind == IRON_OP_SUBTRACT ? "iop_csub"
                                                           : "iop_cmul",
                            a, b);
      return IRON_OK;
    case IRON_OP_NEGATE:
      if (!rt.is_complex) break;
      iron_cuda_text_printf(t, "%s %s; %s.re = -%s.re; %s.im = -%s.im;\n",
                            rt.comp, dst, dst, a, dst, a);
      return IRON_OK;
    case IRON_OP_SELECT:
      if (!rt.is_complex) break;
      iron_cuda_text_printf(t, "%s %s = %s ? %s : %s;\n", rt.comp, dst, a, b,
                            c);
      return IRON_OK;
    case IRON_OP_REAL:
    case IRON_OP_IMAG:
      if (!ot.is_complex || rt.is_complex) break;
      iron_cuda_text_printf(t, "%s %s = %s.%s;\n", rt.comp, dst, a,
                            op->kind == IRON_OP_REAL ? "re" : "im");
      return IRON_OK;
    case IRON_OP_COMPLEX:
      if (!rt.is_complex || ot.is_complex) break;
      iron_cuda_text_printf(t, "%s %s; %s.re = %s; %s.im = %s;\n", rt.comp,
                            dst, dst, a, dst, b);
      return IRON_OK;
    case IRON_OP_COMPARE: {
      // As the host's element-wise complex compares (ew_complex.h, measured
      // on XLA:CPU): EQ/NE on both parts, GT/LT lexicographic, GE/LE on
      // the real parts only; parts read with denormals as zero like every
      // float compare here.
      int32_t dir = iron_ir_op_enum(op, "comparison_direction", -1);
      const char *dz = iron_cuda_flush_denormals() ? "iop_daz" : "";
      char ar[48], ai[48], br[48], bi[48];
      snprintf(ar, sizeof(ar), "%s(%s.re)", dz, a);
      snprintf(ai, sizeof(ai), "%s(%s.im)", dz, a);
      snprintf(br, sizeof(br), "%s(%s.re)", dz, b);
      snprintf(bi, sizeof(bi), "%s(%s.im)", dz, b);
      switch (dir) {
        case IRON_CMP_EQ:
        case IRON_CMP_NE:
          iron_cuda_text_printf(t, "iop_u8 %s = %s(%s == %s && %s == %s);\n",
                                dst, dir == IRON_CMP_NE ? "!" : "", ar, br, ai,
                                bi);
          return IRON_OK;
        case IRON_CMP_GT:
        case IRON_CMP_LT: {
          const char *o = dir == IRON_CMP_GT ? ">" : "<";
          iron_cuda_text_printf(
              t, "iop_u8 %s = %s %s %s || (%s == %s && %s %s %s);\n", dst, ar,
              o, br, ar, br, ai, o, bi);
          return IRON_OK;
        }
        case IRON_CMP_GE:
        case IRON_CMP_LE:
          iron_cuda_text_printf(t, "iop_u8 %s = %s %s %s;\n", dst, ar,
                                dir == IRON_CMP_GE ? ">=" : "<=", br);
          return IRON_OK;
        default:
          break;
      }
      break;
    }
    case IRON_OP_MAXIMUM:
    case IRON_OP_MINIMUM:
      // XLA:CPU's complex max/min: x if re(x) >= re(y) (<= for min).
      if (!rt.is_complex || !ot.is_complex) break;
      iron_cuda_text_printf(t, "%s %s = %s.re %s %s.re ? %s : %s;\n", rt.comp,
                            dst, a, op->kind == IRON_OP_MAXIMUM ? ">=" : "<=",
                            b, a, b);
      return IRON_OK;
    default:
      break;
  }
  return iron_ir_op_unimplemented(op, "in a cuda region for complex values");
}

// The module of the regions being generated (for func.call), set by the
// kernel glue around a generator call: region IR does not reach its module.
// Per thread, as prepares may run on several threads.
static _Thread_local const iron_ir_module_t *g_module;

void iron_cuda_gen_set_module(const iron_ir_module_t *module) {
  g_module = module;
}

// The name of operand/return value `v` of an op in `blk` in `buf`; outer
// constants are generated in place as k<tag>.
static iron_status_t operand_text(iron_cuda_text_t *t,
                                  const iron_ir_block_t *blk,
                                  const iron_ir_op_t *op,
                                  const iron_ir_value_t *v, const char *tag,
                                  char *buf, size_t cap) {
  if (value_name(blk, v, buf, cap)) return IRON_OK;
  if (!outer_constant(v))
    return iron_ir_op_unimplemented(op, "in a cuda region (outer value)");
  snprintf(buf, cap, "k%s", tag);
  return emit_constant(t, buf, v->def_op);
}

static iron_status_t emit_ops(iron_cuda_text_t *t, const iron_ir_block_t *blk,
                              int depth);

// convert from or to a narrow dtype (values in their comp type), as the
// host's ew_narrow.c: narrow floats and s4/u4 widen exactly; to a narrow
// float through f64 (f32/f16/bf16 sources with denormals flushed, as the
// element-wise generator) and to f8E8M0FNU from f32/bf16 bits; to s4/u4
// from integers by their low bits. The rest (f8E8M0FNU widened to other
// than f32/bf16/pred, to f8E8M0FNU from others) is refused here.
static iron_status_t emit_narrow_convert(iron_cuda_text_t *t,
                                         const iron_ir_op_t *op,
                                         iron_dtype_t from, iron_dtype_t to,
                                         const char *dst, const char *a) {
  iron_cuda_gen_type_t ft = iron_cuda_gen_type_narrow(from);
  iron_cuda_gen_type_t tt = iron_cuda_gen_type_narrow(to);
  bool se = from == IRON_DTYPE_F8E8M0FNU, de = to == IRON_DTYPE_F8E8M0FNU;
  bool fint = !ft.is_float && !ft.is_complex;  // ints, pred, s4/u4
  int eb, mb, bias, kind;
  if (ft.is_complex || tt.is_complex) goto refuse;
  if (!tt.is_narrow) {  // narrow -> wide
    if (se) {
      if (to == IRON_DTYPE_F32 || to == IRON_DTYPE_BF16) {
        iron_cuda_text_printf(t, "float %s = %s;\n", dst, a);
        return IRON_OK;
      }
      if (to == IRON_DTYPE_PRED) {  // 2^-127 (an f32 denormal) is false
        iron_cuda_text_printf(t, "iop_u8 %s = !(%s < 1.17549435e-38f);\n",
                              dst, a);
        return IRON_OK;
      }
      goto refuse;
    }
    if (to == IRON_DTYPE_PRED)
      iron_cuda_text_printf(t, "iop_u8 %s = %s != 0;\n", dst, a);
    else  // exact in every wider float or integer comp type
      iron_cuda_text_printf(t, "%s %s = (%s)%s;\n", tt.comp, dst, tt.comp, a);
    return IRON_OK;
  }
  if (to == IRON_DTYPE_S4 || to == IRON_DTYPE_U4) {
    if (!fint) goto refuse;  // float -> int: refused above already
    iron_cuda_text_printf(t, "%s %s = %s(%s((iop_s64)%s));\n", tt.comp, dst,
                          tt.ld, tt.st, a);
    return IRON_OK;
  }
  if (de) {
    if (from != IRON_DTYPE_F32 && from != IRON_DTYPE_BF16 && !se)
      goto refuse;
    iron_cuda_text_printf(t, "float %s = iop_e8m0_ld(iop_e8m0_st(%s));\n",
                          dst, a);
    return IRON_OK;
  }
  if (se || !iron_cuda_nf_format(to, &eb, &mb, &bias, &kind)) goto refuse;
  bool daz = iron_cuda_flush_denormals() &&
             (from == IRON_DTYPE_F32 || from == IRON_DTYPE_F16 ||
              from == IRON_DTYPE_BF16);
  iron_cuda_text_printf(
      t, "float %s = (float)iop_nf_decode(iop_nf_encode((double)%s(%s), %d, "
         "%d, %d, %d), %d, %d, %d, %d);\n",
      dst, daz ? "iop_daz" : "", a, eb, mb, bias, kind, eb, mb, bias, kind);
  return IRON_OK;
refuse:
  return iron_ir_op_unimplemented(op, "in a cuda region (%s -> %s)",
                                  iron_dtype_name(from), iron_dtype_name(to));
}

static bool type_narrow(const iron_ir_type_t *ty) {
  return ty && iron_cuda_gen_type_narrow(ty->dtype).is_narrow;
}

// True when a value of `blk` (or of a function it calls) has a narrow
// dtype: the region then needs iron_cuda_gen_narrow_helpers.
static bool block_touches_narrow(const iron_ir_block_t *blk, int depth) {
  for (uint32_t i = 0; i < blk->num_args; ++i)
    if (type_narrow(blk->args[i].type)) return true;
  for (uint32_t oi = 0; oi < blk->num_ops; ++oi) {
    const iron_ir_op_t *op = blk->ops[oi];
    for (uint32_t k = 0; k < op->num_operands; ++k)
      if (type_narrow(op->operands[k]->type)) return true;
    for (uint32_t k = 0; k < op->num_results; ++k)
      if (type_narrow(op->results[k].type)) return true;
    if (op->kind == IRON_OP_FUNC_CALL && g_module && depth < 8) {
      const char *name = iron_ir_op_string(op, "callee");
      if (name && name[0] == '@') name++;
      const iron_ir_func_t *f =
          name ? iron_ir_module_lookup(g_module, name) : NULL;
      if (f && f->body.num_blocks == 1 &&
          block_touches_narrow(&f->body.blocks[0], depth + 1))
        return true;
    }
  }
  return false;
}

// func.call inside a region (jnp.where in a reduce body lowers to one):
// the callee's body is inlined in a scope of its own. Arguments and results
// pass through ci<depth>_<op>_<i> / cr<depth>_<op>_<i>, names no IR value
// gets, so the callee's names may shadow the caller's freely.
static iron_status_t emit_call(iron_cuda_text_t *t, const iron_ir_block_t *blk,
                               const iron_ir_op_t *op, uint32_t oi,
                               int depth) {
  if (!g_module)
    return iron_ir_op_unimplemented(op, "in a cuda region (no module)");
  if (depth >= 8)
    return iron_ir_op_unimplemented(op, "in a cuda region (calls nested "
                                        "deeper than 8)");
  const char *name = iron_ir_op_string(op, "callee");
  if (name && name[0] == '@') name++;
  const iron_ir_func_t *f = name ? iron_ir_module_lookup(g_module, name) : NULL;
  if (!f || f->body.num_blocks != 1)
    return iron_ir_op_unimplemented(op, "in a cuda region (callee @%s)",
                                    name ? name : "?");
  const iron_ir_block_t *cb = &f->body.blocks[0];
  const iron_ir_op_t *ret = cb->num_ops ? cb->ops[cb->num_ops - 1] : NULL;
  if (cb->num_args != op->num_operands || !ret ||
      (ret->kind != IRON_OP_FUNC_RETURN && ret->kind != IRON_OP_RETURN) ||
      ret->num_operands != op->num_results)
    return IRON_ERR(INVALID_ARGUMENT, "%s: call of @%s does not match it",
                    op->name, name);
  char nm[48], tag[32];
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *ty = op->operands[i]->type;
    iron_cuda_gen_type_t ct = iron_cuda_gen_type_narrow(ty ? ty->dtype : 0);
    if (!scalar_type(ty) || !ct.store)
      return iron_ir_op_unimplemented(op, "in a cuda region (non-scalar)");
    snprintf(tag, sizeof(tag), "%u_%u", oi, i);
    IRON_RETURN_IF_ERROR_PLAIN(
        operand_text(t, blk, op, op->operands[i], tag, nm, sizeof(nm)));
    iron_cuda_text_printf(t, "const %s ci%d_%u_%u = %s;\n", ct.comp, depth, oi,
                          i, nm);
  }
  for (uint32_t i = 0; i < op->num_results; ++i) {
    const iron_ir_type_t *ty = op->results[i].type;
    iron_cuda_gen_type_t ct = iron_cuda_gen_type_narrow(ty ? ty->dtype : 0);
    if (!scalar_type(ty) || !ct.store)
      return iron_ir_op_unimplemented(op, "in a cuda region (non-scalar)");
    iron_cuda_text_printf(t, "%s cr%d_%u_%u;\n", ct.comp, depth, oi, i);
  }
  iron_cuda_text_printf(t, "{\n");
  for (uint32_t i = 0; i < cb->num_args; ++i) {
    iron_cuda_gen_type_t ct = iron_cuda_gen_type_narrow(op->operands[i]->type->dtype);
    if (!cb->args[i].type ||
        cb->args[i].type->dtype != op->operands[i]->type->dtype)
      return IRON_ERR(INVALID_ARGUMENT, "%s: argument %u of @%s has another "
                      "type", op->name, i, name);
    iron_cuda_text_printf(t, "const %s a%u = ci%d_%u_%u;\n", ct.comp, i, depth,
                          oi, i);
  }
  IRON_RETURN_IF_ERROR_PLAIN(emit_ops(t, cb, depth + 1));
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    snprintf(tag, sizeof(tag), "r%u", i);
    IRON_RETURN_IF_ERROR_PLAIN(
        operand_text(t, cb, ret, ret->operands[i], tag, nm, sizeof(nm)));
    iron_cuda_text_printf(t, "cr%d_%u_%u = %s;\n", depth, oi, i, nm);
  }
  iron_cuda_text_printf(t, "}\n");
  for (uint32_t i = 0; i < op->num_results; ++i) {
    iron_cuda_gen_type_t ct = iron_cuda_gen_type_narrow(op->results[i].type->dtype);
    iron_cuda_text_printf(t, "const %s t%u_%u = cr%d_%u_%u;\n", ct.comp, oi, i,
                          depth, oi, i);
  }
  return IRON_OK;
}

// Emits every op of `blk` but its terminator; `depth` counts the calls
// being inlined (emit_call).
static iron_status_t emit_ops(iron_cuda_text_t *t, const iron_ir_block_t *blk,
                              int depth) {
  char a[32], b[32], c[32], dst[32];
  for (uint32_t oi = 0; oi + 1 < blk->num_ops; ++oi) {
    const iron_ir_op_t *op = blk->ops[oi];
    if (op->kind == IRON_OP_FUNC_CALL) {
      IRON_RETURN_IF_ERROR_PLAIN(emit_call(t, blk, op, oi, depth));
      continue;
    }
    if (op->num_results != 1 || !scalar_type(op->results[0].type))
      return iron_ir_op_unimplemented(op, "in a cuda region (non-scalar)");
    snprintf(dst, sizeof(dst), "t%u_0", oi);
    iron_dtype_t rdt = op->results[0].type->dtype;
    iron_cuda_gen_type_t rt = iron_cuda_gen_type_narrow(rdt);
    if (!rt.store)
      return iron_ir_op_unimplemented(op, "in a cuda region for dtype %s",
                                      iron_dtype_name(rdt));
    for (uint32_t k = 0; k < op->num_operands && k < 3; ++k) {
      char *nb = k == 0 ? a : k == 1 ? b : c;
      if (value_name(blk, op->operands[k], nb, 32)) continue;
      if (!outer_constant(op->operands[k]))
        return iron_ir_op_unimplemented(op, "in a cuda region (outer value)");
      snprintf(nb, 32, "k%u_%u", oi, k);
      IRON_RETURN_IF_ERROR_PLAIN(
          emit_constant(t, nb, op->operands[k]->def_op));
    }
    iron_dtype_t odt =
        op->num_operands ? op->operands[0]->type->dtype : IRON_DTYPE_INVALID;
    iron_cuda_gen_type_t ot = iron_cuda_gen_type_narrow(odt);
    bool fl = ot.is_float;
    bool un = !fl && !ot.is_signed;  // unsigned ints and pred
    bool cx = ot.is_complex || rt.is_complex;
    if (cx) {
      IRON_RETURN_IF_ERROR_PLAIN(emit_complex_op(t, op, dst, rt, ot, a, b, c));
      continue;
    }
    switch (op->kind) {
      case IRON_OP_CONSTANT:
        IRON_RETURN_IF_ERROR_PLAIN(emit_constant(t, dst, op));
        break;
      case IRON_OP_ADD:
      case IRON_OP_SUBTRACT:
      case IRON_OP_MULTIPLY: {
        const char *sym = op->kind == IRON_OP_ADD        ? "+"
                          : op->kind == IRON_OP_SUBTRACT ? "-"
                                                         : "*";
        if (rdt == IRON_DTYPE_PRED) {
          // XLA: pred add is or, multiply is and.
          if (op->kind == IRON_OP_SUBTRACT)
            return iron_ir_op_unimplemented(op, "in a cuda region for pred");
          iron_cuda_text_printf(t, "iop_u8 %s = %s %s %s;\n", dst, a,
                                op->kind == IRON_OP_ADD ? "|" : "&", b);
        } else if (fl) {
          iron_cuda_text_printf(t, "%s %s = %s %s %s;\n", rt.comp, dst, a, sym,
                                b);
        } else {  // wrap-around integer arithmetic without UB
          iron_cuda_text_printf(t, "%s %s = (%s)((iop_u64)%s %s (iop_u64)%s);\n",
                                rt.comp, dst, rt.comp, a, sym, b);
        }
        break;
      }
      case IRON_OP_DIVIDE:
        if (!fl) return iron_ir_op_unimplemented(op, "in a cuda region (int)");
        iron_cuda_text_printf(t, "%s %s = %s / %s;\n", rt.comp, dst, a, b);
        break;
      case IRON_OP_MAXIMUM:
      case IRON_OP_MINIMUM: {
        const char *f = fl ? (op->kind == IRON_OP_MAXIMUM ? "iop_fmax" : "iop_fmin")
                           : (op->kind == IRON_OP_MAXIMUM ? "iop_imax" : "iop_imin");
        iron_cuda_text_printf(t, "%s %s = %s<%s>(%s, %s);\n", rt.comp, dst, f,
                              rt.comp, a, b);
        break;
      }
      case IRON_OP_AND:
      case IRON_OP_OR:
      case IRON_OP_XOR: {
        if (fl) return iron_ir_op_unimplemented(op, "in a cuda region (float)");
        const char *sym = op->kind == IRON_OP_AND  ? "&"
                          : op->kind == IRON_OP_OR ? "|"
                                                   : "^";
        iron_cuda_text_printf(t, "%s %s = (%s)(%s %s %s);\n", rt.comp, dst,
                              rt.comp, a, sym, b);
        break;
      }
      case IRON_OP_NOT:
        if (fl) return iron_ir_op_unimplemented(op, "in a cuda region (float)");
        if (rdt == IRON_DTYPE_PRED)
          iron_cuda_text_printf(t, "iop_u8 %s = !%s;\n", dst, a);
        else
          iron_cuda_text_printf(t, "%s %s = (%s)~%s;\n", rt.comp, dst,
                                rt.comp, a);
        break;
      case IRON_OP_NEGATE:
        if (fl)
          iron_cuda_text_printf(t, "%s %s = -%s;\n", rt.comp, dst, a);
        else
          iron_cuda_text_printf(t, "%s %s = (%s)(0ull - (iop_u64)%s);\n",
                                rt.comp, dst, rt.comp, a);
        break;
      case IRON_OP_ABS:
        if (fl)
          iron_cuda_text_printf(t, "%s %s = fabs(%s);\n", rt.comp, dst, a);
        else
          iron_cuda_text_printf(t, "%s %s = %s < 0 ? (%s)(0ull - (iop_u64)%s) : %s;\n",
                                rt.comp, dst, a, rt.comp, a, a);
        break;
      case IRON_OP_SELECT:
        iron_cuda_text_printf(t, "%s %s = %s ? %s : %s;\n", rt.comp, dst, a, b,
                              c);
        break;
      case IRON_OP_COMPARE: {
        const char *sym =
            cmp_op(iron_ir_op_enum(op, "comparison_direction", -1));
        int32_t ctype = iron_ir_op_enum(op, "compare_type", 0);
        if (!sym) return iron_ir_op_unimplemented(op, "(bad direction)");
        if (fl && ctype == IRON_CMP_TYPE_TOTALORDER) {
          // bf16/f16 are exact in float, so the float total order is
          // theirs.
          iron_cuda_text_printf(t, "iop_u8 %s = iop_total(%s) %s iop_total(%s);\n",
                                dst, a, sym, b);
        } else if (fl && iron_cuda_flush_denormals()) {
          // XLA:CPU compares with denormals flushed (DAZ): jax's sort
          // comparator's `x == 0` holds for a denormal x (host sort.c).
          // NVRTC's -ftz covers f32 but not f64; explicit for both.
          iron_cuda_text_printf(t, "iop_u8 %s = iop_daz(%s) %s iop_daz(%s);\n",
                                dst, a, sym, b);
        } else if (!fl && ctype == IRON_CMP_TYPE_UNSIGNED && ot.is_signed) {
          iron_cuda_text_printf(t, "iop_u8 %s = (iop_u64)%s %s (iop_u64)%s;\n",
                                dst, a, sym, b);
        } else {
          iron_cuda_text_printf(t, "iop_u8 %s = %s %s %s;\n", dst, a, sym, b);
        }
        (void)un;
        break;
      }
      case IRON_OP_CONVERT: {
        // Float -> integer conversions need XLA's saturation rules: not in
        // bodies yet.
        if (fl && !rt.is_float)
          return iron_ir_op_unimplemented(op, "in a cuda region (float->int)");
        if (ot.is_narrow || rt.is_narrow) {
          IRON_RETURN_IF_ERROR_PLAIN(
              emit_narrow_convert(t, op, odt, rdt, dst, a));
          continue;  // rounded already
        }
        if (rdt == IRON_DTYPE_PRED)
          iron_cuda_text_printf(t, "iop_u8 %s = %s != 0;\n", dst, a);
        else
          iron_cuda_text_printf(t, "%s %s = (%s)%s;\n", rt.comp, dst, rt.comp,
                                a);
        break;
      }
      default: {
        // Float ops that are one libm call, spelled as the element-wise
        // generator spells them (iron_cuda_libm_name); f16/bf16 results
        // rounded, f64 denormals flushed in and out as XLA:CPU (f32:
        // NVRTC's -ftz).
        const char *lm = iron_cuda_libm_name(op->kind);
        iron_op_class_t cls = iron_op_kind_class(op->kind);
        uint32_t ar = cls == IRON_OP_CLASS_UNARY ? 1 : 2;
        if (!lm || !fl || rdt != odt || op->num_operands != ar ||
            (ar == 2 && op->operands[1]->type->dtype != odt))
          return iron_ir_op_unimplemented(op, "in a cuda region");
        bool dz = rdt == IRON_DTYPE_F64 && iron_cuda_flush_denormals();
        const char *F = rdt == IRON_DTYPE_F64 ? "" : "f";
        const char *w = dz ? "iop_daz" : "";
        char ex[256];
        if (ar == 1)
          snprintf(ex, sizeof(ex), "%s%s(%s(%s))", lm, F, w, a);
        else
          snprintf(ex, sizeof(ex), "%s%s(%s(%s), %s(%s))", lm, F, w, a, w, b);
        if (rdt == IRON_DTYPE_F16 || rdt == IRON_DTYPE_BF16)
          iron_cuda_text_printf(t, "%s %s = %s(%s(%s));\n", rt.comp, dst,
                                rt.ld, rt.st, ex);
        else
          iron_cuda_text_printf(t, "%s %s = %s(%s);\n", rt.comp, dst, w, ex);
        break;
      }
    }
    // A narrow result is the wide op's value (f16/f32/s8/u8 as computed
    // above) rounded to the narrow dtype, as XLA:CPU (and the host's
    // ew_narrow.c) convert every op's result back. Ops that only pick one
    // of their operands (or decode a constant) skip it; negate and abs do
    // not (-0 of an FNUZ dtype is +0; abs of s4 -8 wraps).
    if (rt.is_narrow && op->kind != IRON_OP_SELECT &&
        op->kind != IRON_OP_CONSTANT && op->kind != IRON_OP_MAXIMUM &&
        op->kind != IRON_OP_MINIMUM)
      iron_cuda_text_printf(t, "%s = %s(%s(%s));\n", dst, rt.ld, rt.st, dst);
  }
  return IRON_OK;
}

iron_status_t iron_cuda_gen_region_fn(iron_cuda_text_t *t, const char *fname,
                                      const iron_ir_region_t *region) {
  if (!region || region->num_blocks != 1)
    return IRON_ERR(UNIMPLEMENTED, "cuda region: expected one block");
  const iron_ir_block_t *blk = &region->blocks[0];
  if (blk->num_ops == 0 || blk->ops[blk->num_ops - 1]->kind != IRON_OP_RETURN)
    return IRON_ERR(UNIMPLEMENTED, "cuda region: no return");
  const iron_ir_op_t *ret = blk->ops[blk->num_ops - 1];
  if (block_touches_narrow(blk, 0)) iron_cuda_gen_narrow_helpers(t);
  // Signature.
  iron_cuda_text_printf(t, "__device__ __forceinline__ void %s(", fname);
  for (uint32_t i = 0; i < blk->num_args; ++i) {
    const iron_ir_type_t *ty = blk->args[i].type;
    iron_cuda_gen_type_t ct = iron_cuda_gen_type_narrow(ty ? ty->dtype : 0);
    if (!scalar_type(ty) || !ct.store)
      return IRON_ERR(UNIMPLEMENTED,
                      "cuda region: argument %u is not a scalar", i);
    iron_cuda_text_printf(t, "%sconst %s a%u", i ? ", " : "", ct.comp, i);
  }
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    iron_cuda_gen_type_t ct = iron_cuda_gen_type_narrow(ret->operands[i]->type->dtype);
    if (!ct.store)
      return IRON_ERR(UNIMPLEMENTED, "cuda region: result %u unsupported", i);
    iron_cuda_text_printf(t, "%s%s *r%u", (i || blk->num_args) ? ", " : "",
                          ct.comp, i);
  }
  iron_cuda_text_printf(t, ") {\n");
  IRON_RETURN_IF_ERROR_PLAIN(emit_ops(t, blk, 0));
  char a[32];
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    if (!value_name(blk, ret->operands[i], a, sizeof(a))) {
      if (!outer_constant(ret->operands[i]))
        return IRON_ERR(UNIMPLEMENTED, "cuda region: returns an outer value");
      snprintf(a, sizeof(a), "kr%u", i);
      IRON_RETURN_IF_ERROR_PLAIN(
          emit_constant(t, a, ret->operands[i]->def_op));
    }
    iron_cuda_text_printf(t, "*r%u = %s;\n", i, a);
  }
  iron_cuda_text_printf(t, "}\n");
  return IRON_OK;
}

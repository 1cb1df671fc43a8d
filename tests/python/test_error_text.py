"""Error messages that quote raw bytes of a program (a custom_call target, a
string attribute) reach Python as messages, with the bytes that are not
printable UTF-8 escaped as \\xNN once, where statuses become PJRT errors
(src/pjrt/pjrt_error.c); jaxlib decodes messages as UTF-8 and raised
UnicodeDecodeError instead (issue 13)."""
import numpy as np
import pytest
import jax
from jax._src import compiler
from jax._src.lib import xla_client as xc


def _compile_text(dev, text):
    module = ("module @m attributes {mhlo.num_partitions = 1 : i32, "
              "mhlo.num_replicas = 1 : i32} {" + text + "\n}")
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    return dev.client.compile_and_load(module, xc.DeviceList((dev,)), options)


def _custom_call(target):
    return rf'''
func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {{
  %y = stablehlo.custom_call @"{target}"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}}'''


@pytest.mark.parametrize("target, shown", [
    (r"bad\FF\FE\01target", r"bad\xff\xfe\x01target"),  # invalid UTF-8, C0
    (r"\C0\AFslash", r"\xc0\xafslash"),                 # overlong "/"
    (r"\ED\A0\80surrogate", r"\xed\xa0\x80surrogate"),  # UTF-16 surrogate
    (r"tab\09ok\1B[31m", r"tab	ok\x1b[31m"),          # tab kept, ESC not
    (r"caf\C3\A9 \E2\82\AC \F0\9F\98\80", "café € 😀"),  # valid UTF-8 kept
])
def test_raw_bytes_in_messages_are_escaped(iron_device, target, shown):
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        _compile_text(iron_device, _custom_call(target))
    msg = str(e.value)
    assert "UNIMPLEMENTED" in msg
    assert f'target "{shown}"' in msg, msg
    # The device still works.
    x = jax.device_put(np.float32(2), iron_device)
    assert float(jax.jit(lambda v: v * 3)(x)) == 6.0



_MEMORY_KIND_PROBE = r'''
import sys, jax
sys.path.insert(0, sys.argv[2])
from test_error_text import _compile_text
kind = "pinned_device_memory_of_another_backend"
attr = '{mhlo.memory_kind = "%s"}' % kind
arg, res = (attr, "") if sys.argv[1] == "argument" else ("", attr)
text = """
func.func public @main(%%x: tensor<2xf32> %s) -> (tensor<2xf32> %s) {
  return %%x : tensor<2xf32>
}""" % (arg, res)
try:
    _compile_text(jax.devices()[0], text)
    print("compiled")
except jax.errors.JaxRuntimeError as e:
    print(str(e))
print(float(jax.jit(lambda v: v * 3)(2.0)))
'''


@pytest.mark.parametrize("where", ["argument", "result"])
def test_unknown_memory_kind_is_named(iron_device, where):
    # The refusal quotes the kind from the program. It belongs to the
    # compiled executable, released once the message is made: the CUDA
    # device printed freed memory there ("(\x0eX>"). A process of its own
    # with glibc's MALLOC_PERTURB_ (freed memory overwritten) shows a read
    # after the free.
    import os
    import subprocess
    import sys
    env = dict(os.environ, MALLOC_PERTURB_="165",
               JAX_PLATFORMS=iron_device.platform)
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", _MEMORY_KIND_PROBE, where,
                          here], env=env, capture_output=True, text=True,
                         timeout=300)
    kind = "pinned_device_memory_of_another_backend"
    assert f'{where} 0 of the program is placed in memory kind "{kind}"' \
        in out.stdout, out.stdout + out.stderr
    assert out.stdout.strip().endswith("6.0"), out.stdout + out.stderr

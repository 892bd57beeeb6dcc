"""gen_keras.py writes the tf.keras 2 and Keras 3 fixtures of Functional
graphs (see README.md) without Keras, which cannot run here: each model
is built once with a small stand-in for the functional API that infers
shapes as Keras does, and serialised in each form as Keras writes it:

  tf.keras 2.x (2.15) Model.to_json(): layers {"class_name", "config",
    "name", "inbound_nodes": [[[layer, node, tensor, {}], ...]]}, configs
    from each layer's get_config (dtype "float32", BatchNormalization's
    axis [3] after build), input_layers and output_layers lists of
    [layer, node, tensor] (tensorflow/python/keras/engine/functional.py
    get_network_config, node.py serialize);
  Keras 3 Model.to_json(): every object as serialize_keras_object writes
    it ({"module", "class_name", "config", "registered_name"}, the
    layers' "build_config"), inbound_nodes [{"args": [...], "kwargs":
    {...}}] holding "__keras_tensor__" objects with their "keras_history"
    (a merge's args[0] the list of its tensors), input_layers and
    output_layers one [layer, node, tensor] when single
    (keras/src/models/functional.py get_config, serialize_node;
    keras/src/saving/serialization_lib.py).

  python3 gen_keras.py [DIR]   (DIR: this script's directory by default)
"""
import json
import os
import sys


class T:
    """A tensor: the layer that made it and its shape (batch first)."""

    def __init__(self, layer, shape, node=0):
        self.layer, self.shape, self.node = layer, shape, node


class Model:
    def __init__(self, name):
        self.name, self.layers, self.names = name, [], set()

    def add(self, cls, name, cfg, ins, out_shape, calls=None):
        assert name not in self.names, name
        self.names.add(name)
        self.layers.append({"cls": cls, "name": name, "cfg": cfg, "calls": calls or [ins], "shape": out_shape})
        return T(name, out_shape)


def same(n, s):
    return (n + s - 1) // s


def conv(m, x, filters, k, strides=1, padding="same", name=None, use_bias=True, activation="linear", init="HeNormal"):
    h, w = x.shape[1], x.shape[2]
    if padding == "same":
        oh, ow = same(h, strides), same(w, strides)
    else:
        oh, ow = (h - k) // strides + 1, (w - k) // strides + 1
    cfg = dict(filters=filters, kernel_size=[k, k], strides=[strides, strides], padding=padding, data_format="channels_last",
               dilation_rate=[1, 1], groups=1, activation=activation, use_bias=use_bias,
               kernel_initializer=("init", init, {"seed": None}), bias_initializer=("init", "Zeros", {}),
               kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, bias_constraint=None)
    return m.add("Conv2D", name, cfg, [x], [None, oh, ow, filters])


def bn(m, x, name, momentum=0.99):
    cfg = dict(axis=-1, momentum=momentum, epsilon=0.001, center=True, scale=True,
               beta_initializer=("init", "Zeros", {}), gamma_initializer=("init", "Ones", {}),
               moving_mean_initializer=("init", "Zeros", {}), moving_variance_initializer=("init", "Ones", {}),
               beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None)
    return m.add("BatchNormalization", name, cfg, [x], x.shape)


def act(m, x, fn, name):
    return m.add("Activation", name, dict(activation=fn), [x], x.shape)


def merge(m, cls, xs, name):
    for x in xs[1:]:
        assert x.shape == xs[0].shape, (name, [x.shape for x in xs])
    return m.add(cls, name, {}, xs, xs[0].shape)


def concat(m, xs, name, axis=-1):
    shape = list(xs[0].shape)
    a = axis % len(shape)
    shape[a] = sum(x.shape[a] for x in xs)
    return m.add("Concatenate", name, dict(axis=axis), xs, shape)


def pool(m, cls, x, size, name, strides=None, padding="valid"):
    s = strides or size
    h, w = x.shape[1], x.shape[2]
    oh, ow = (same(h, s), same(w, s)) if padding == "same" else ((h - size) // s + 1, (w - size) // s + 1)
    cfg = dict(pool_size=[size, size], padding=padding, strides=[s, s], data_format="channels_last")
    return m.add(cls, name, cfg, [x], [None, oh, ow, x.shape[3]])


def depthwise(m, x, k, name, strides=1, padding="same", use_bias=True):
    h, w = x.shape[1], x.shape[2]
    oh, ow = (same(h, strides), same(w, strides)) if padding == "same" else ((h - k) // strides + 1, (w - k) // strides + 1)
    cfg = dict(depth_multiplier=1, kernel_size=[k, k], strides=[strides, strides], padding=padding, data_format="channels_last",
               dilation_rate=[1, 1], activation="linear", use_bias=use_bias,
               depthwise_initializer=("init", "GlorotUniform", {"seed": None}), bias_initializer=("init", "Zeros", {}),
               depthwise_regularizer=None, bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None, bias_constraint=None)
    return m.add("DepthwiseConv2D", name, cfg, [x], [None, oh, ow, x.shape[3]])


def gap(m, x, name):
    return m.add("GlobalAveragePooling2D", name, dict(data_format="channels_last", keepdims=False), [x], [None, x.shape[3]])


def flatten(m, x, name):
    n = 1
    for d in x.shape[1:]:
        n *= d
    return m.add("Flatten", name, dict(data_format="channels_last"), [x], [None, n])


def dense(m, x, units, name, activation="linear"):
    cfg = dict(units=units, activation=activation, use_bias=True,
               kernel_initializer=("init", "GlorotUniform", {"seed": None}), bias_initializer=("init", "Zeros", {}),
               kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, bias_constraint=None)
    return m.add("Dense", name, cfg, [x], [None, units])


def inp(m, shape, name):
    m.add("InputLayer", name, None, [], [None] + shape)
    return T(name, [None] + shape)


# --- the models ---------------------------------------------------------


def resnet20(classes=10):
    """ResNet-20 as Keras users write it (keras.io's CIFAR-10 ResNet v1,
    with convolutions without bias before BatchNormalization as
    keras.applications' ResNets have them): 3 stages of 3 basic blocks,
    16/32/64 filters, projection shortcuts (1×1 conv + BN) where the shape
    changes, global average pooling, dense softmax."""
    m = Model("resnet20")
    x = inp(m, [32, 32, 3], "image")
    y = conv(m, x, 16, 3, name="conv", use_bias=False)
    y = bn(m, y, "bn")
    y = act(m, y, "relu", "relu")
    c = 16
    for stage, width in enumerate((16, 32, 64)):
        for i in range(3):
            p = "stage%d_block%d_" % (stage + 1, i + 1)
            stride = 2 if stage > 0 and i == 0 else 1
            b = conv(m, y, width, 3, stride, name=p + "conv1", use_bias=False)
            b = bn(m, b, p + "bn1")
            b = act(m, b, "relu", p + "relu1")
            b = conv(m, b, width, 3, name=p + "conv2", use_bias=False)
            b = bn(m, b, p + "bn2")
            s = y
            if stride != 1 or c != width:
                s = conv(m, y, width, 1, stride, name=p + "proj", use_bias=False)
                s = bn(m, s, p + "proj_bn")
            y = merge(m, "Add", [b, s], p + "add")
            y = act(m, y, "relu", p + "out")
            c = width
    y = gap(m, y, "pool")
    dense(m, y, classes, "scores", "softmax")
    return m


def branches():
    """An Inception-style block on 28×28×1 (MNIST's shape): 1×1, 3×3 and
    pooled branches joined by Concatenate on channels, pooled maps joined
    on rows and columns, then dense branches merged by Subtract, Multiply,
    Average, Maximum and Minimum and joined again."""
    m = Model("branches")
    x = inp(m, [28, 28, 1], "image")
    b1 = conv(m, x, 4, 1, name="branch_1x1", activation="relu")
    b2 = conv(m, x, 4, 3, name="branch_3x3", activation="relu")
    b3 = pool(m, "MaxPooling2D", x, 3, "branch_pool", strides=1, padding="same")
    b3 = conv(m, b3, 4, 1, name="branch_pool_1x1", activation="relu")
    cat = concat(m, [b1, b2, b3], "channels")  # 28×28×12
    mp = pool(m, "MaxPooling2D", cat, 4, "max_pool")  # 7×7×12
    ap = pool(m, "AveragePooling2D", cat, 4, "avg_pool")  # 7×7×12
    rows = concat(m, [mp, ap], "rows", axis=1)  # 14×7×12
    cols = concat(m, [rows, rows], "cols", axis=2)  # 14×14×12
    f = flatten(m, cols, "flatten")
    d1 = dense(m, f, 16, "dense_relu", "relu")
    d2 = dense(m, f, 16, "dense_tanh", "tanh")
    diff = merge(m, "Subtract", [d1, d2], "subtract")
    avg = merge(m, "Average", [d1, d2], "average")
    mx = merge(m, "Maximum", [d1, d2, avg], "maximum")
    mn = merge(m, "Minimum", [d1, diff], "minimum")
    mul = merge(m, "Multiply", [mx, mn], "multiply")
    both = concat(m, [mul, avg, diff], "features")  # 48
    dense(m, both, 10, "scores", "softmax")
    return m


def concat_add():
    """A block with branches joined by Concatenate, normalised and added
    back to its input (Inception-ResNet's shape), on 28×28×1."""
    m = Model("concat_add")
    x = inp(m, [28, 28, 1], "image")
    stem = conv(m, x, 8, 3, name="stem", activation="relu")
    b1 = conv(m, stem, 4, 1, name="branch_1x1", activation="relu")
    b2 = conv(m, stem, 4, 3, name="branch_3x3", activation="relu")
    cat = concat(m, [b1, b2], "branches")  # 28×28×8
    cat = bn(m, cat, "branches_bn")
    y = merge(m, "Add", [cat, stem], "residual")
    y = act(m, y, "relu", "relu")
    y = pool(m, "MaxPooling2D", y, 4, "pool")  # 7×7×8
    y = flatten(m, y, "flatten")
    dense(m, y, 10, "scores", "softmax")
    return m


def depthwise_branches():
    """MobileNet's depthwise-separable convolution beside a 1×1 branch,
    joined by Concatenate, on 28×28×1 (MNIST's shape)."""
    m = Model("depthwise_branches")
    x = inp(m, [28, 28, 1], "image")
    stem = conv(m, x, 8, 3, 2, name="stem", activation="relu")  # 14×14×8
    a = depthwise(m, stem, 3, "depthwise", use_bias=False)
    a = bn(m, a, "depthwise_bn")
    a = act(m, a, "relu", "depthwise_relu")
    a = conv(m, a, 8, 1, padding="valid", name="pointwise", activation="relu")
    b = conv(m, stem, 8, 1, padding="valid", name="branch_1x1", activation="relu")
    y = concat(m, [a, b], "branches")  # 14×14×16
    y = pool(m, "MaxPooling2D", y, 2, "pool")  # 7×7×16
    y = flatten(m, y, "flatten")
    dense(m, y, 10, "scores", "softmax")
    return m


def shared():
    """A Dense layer called twice (shared weights)."""
    m = Model("shared")
    x = inp(m, [784], "pixels")
    h = dense(m, x, 32, "hidden", "relu")
    m.layers.append({"cls": "Dense", "name": "tied", "shape": [None, 32], "calls": [[h], [T("tied", [None, 32])]],
                     "cfg": m.layers[-1]["cfg"] | {"units": 32}})
    m.names.add("tied")
    dense(m, T("tied", [None, 32], node=1), 10, "scores", "softmax")
    return m


def two_inputs():
    """Two inputs joined by Concatenate."""
    m = Model("two_inputs")
    a = inp(m, [8], "left")
    b = inp(m, [8], "right")
    c = concat(m, [a, b], "joined")
    dense(m, c, 10, "scores", "softmax")
    m.inputs = ["left", "right"]
    return m


def rows_input():
    """A 28×28 input (no channel axis): Keras's Concatenate axis -1 joins
    columns there."""
    m = Model("rows_input")
    x = inp(m, [28, 28], "pixels")
    r = act(m, x, "relu", "relu")
    c = concat(m, [x, r], "columns")  # 28×56
    f = flatten(m, c, "flatten")
    dense(m, f, 10, "scores", "softmax")
    return m


# --- serialisation -----------------------------------------------------


def keras_order(m):
    """The layers in the order Keras lists them in get_config: by
    decreasing depth from the outputs, layers of one depth in the order a
    depth-first walk from the outputs first meets them
    (tensorflow/python/keras/engine/functional.py _map_graph_network and
    _build_map; TensorFlow.js's container.ts orders them alike)."""
    by_name = {l["name"]: l for l in m.layers}
    finished, order, index = set(), [], {}

    def walk(layer, node):
        if (layer, node) in finished:
            return
        index.setdefault(layer, len(index))
        calls = by_name[layer]["calls"]
        if calls and calls[node]:
            for t in calls[node]:
                walk(t.layer, t.node)
        finished.add((layer, node))
        order.append((layer, node))

    walk(m.layers[-1]["name"], 0)
    node_depth, layer_depth = {}, {}
    for layer, node in reversed(order):
        d = max(node_depth.setdefault((layer, node), 0), layer_depth.get(layer, 0))
        layer_depth[layer] = node_depth[(layer, node)] = d
        calls = by_name[layer]["calls"]
        if calls and calls[node]:
            for t in calls[node]:
                node_depth[(t.layer, t.node)] = max(d + 1, node_depth.get((t.layer, t.node), 0))
    layers = sorted(layer_depth, key=lambda l: (-layer_depth[l], index[l]))
    return [by_name[l] for l in layers]


def k2value(v):
    if isinstance(v, tuple) and v[0] == "init":
        return {"class_name": v[1], "config": v[2]}
    return v


def k3value(v):
    if isinstance(v, tuple) and v[0] == "init":
        return {"module": "keras.initializers", "class_name": v[1], "config": v[2], "registered_name": None}
    return v


DTYPE3 = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": None}


def out_refs(m):
    last = m.layers[-1]["name"]
    ins = getattr(m, "inputs", [m.layers[0]["name"]])
    return ins, last


def tfkeras2(m):
    layers = []
    for l in keras_order(m):
        if l["cls"] == "InputLayer":
            layers.append({"class_name": "InputLayer", "config": {"batch_input_shape": l["shape"], "dtype": "float32", "sparse": False,
                                                                   "ragged": False, "name": l["name"]}, "name": l["name"], "inbound_nodes": []})
            continue
        cfg = {"name": l["name"], "trainable": True, "dtype": "float32"}
        for k, v in l["cfg"].items():
            cfg[k] = k2value(v)
        if l["cls"] == "BatchNormalization":
            cfg["axis"] = [len(l["shape"]) - 1]
        if l["cls"] == "DepthwiseConv2D":
            cfg["groups"] = 1  # tf.keras 2's DepthwiseConv2D keeps Conv2D's
        nodes = [[[t.layer, t.node, 0, {}] for t in call] for call in l["calls"]]
        layers.append({"class_name": l["cls"], "config": cfg, "name": l["name"], "inbound_nodes": nodes})
    ins, last = out_refs(m)
    return {"class_name": "Functional", "config": {"name": m.name, "layers": layers, "input_layers": [[n, 0, 0] for n in ins],
                                                   "output_layers": [[last, 0, 0]]}, "keras_version": "2.15.0", "backend": "tensorflow"}


def keras3(m):
    shapes = {l["name"]: l["shape"] for l in m.layers}
    layers = []

    def tensor(t):
        return {"class_name": "__keras_tensor__", "config": {"shape": shapes[t.layer], "dtype": "float32", "keras_history": [t.layer, t.node, 0]}}

    for l in keras_order(m):
        if l["cls"] == "InputLayer":
            layers.append({"module": "keras.layers", "class_name": "InputLayer",
                           "config": {"batch_shape": l["shape"], "dtype": "float32", "sparse": False, "name": l["name"]},
                           "registered_name": None, "name": l["name"], "inbound_nodes": []})
            continue
        cfg = {"name": l["name"], "trainable": True, "dtype": DTYPE3}
        for k, v in l["cfg"].items():
            cfg[k] = k3value(v)
        if l["cls"] == "BatchNormalization":
            cfg["synchronized"] = False
        calls, in_shapes = [], None
        for call in l["calls"]:
            if len(call) > 1 or l["cls"] in ("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate"):
                args = [[tensor(t) for t in call]]
                in_shapes = [shapes[t.layer] for t in call]
            else:
                args = [tensor(call[0])]
                in_shapes = shapes[call[0].layer]
            kwargs = {"mask": None} if l["cls"] == "BatchNormalization" else {}
            calls.append({"args": args, "kwargs": kwargs})
        layers.append({"module": "keras.layers", "class_name": l["cls"], "config": cfg, "registered_name": None,
                       "build_config": {"input_shape": in_shapes}, "name": l["name"], "inbound_nodes": calls})
    ins, last = out_refs(m)
    single = lambda names: [names[0], 0, 0] if len(names) == 1 else [[n, 0, 0] for n in names]
    return {"module": "keras", "class_name": "Functional",
            "config": {"name": m.name, "trainable": True, "layers": layers, "input_layers": single(ins), "output_layers": single([last])},
            "registered_name": "Functional", "build_config": {"input_shape": None}}


def nested():
    """A Keras 3 Functional model with a Sequential inside it (the
    Sequential's own config as Keras 3 writes a nested model)."""
    outer = keras3(flat_outer())
    seq = {"module": "keras", "class_name": "Sequential",
           "config": {"name": "features", "trainable": True, "dtype": DTYPE3, "layers": [
               {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [None, 784], "dtype": "float32", "sparse": False, "name": "features_input"}, "registered_name": None},
               {"module": "keras.layers", "class_name": "Dense", "config": {"name": "features_dense", "trainable": True, "dtype": DTYPE3, "units": 32, "activation": "relu", "use_bias": True,
                                                                              "kernel_initializer": k3value(("init", "GlorotUniform", {"seed": None})), "bias_initializer": k3value(("init", "Zeros", {})),
                                                                              "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None},
                "registered_name": None, "build_config": {"input_shape": [None, 784]}}],
               "build_input_shape": [None, 784]},
           "registered_name": "Sequential", "build_config": {"input_shape": [None, 784]}, "name": "features",
           "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [None, 784], "dtype": "float32", "keras_history": ["pixels", 0, 0]}}], "kwargs": {}}]}
    outer["config"]["layers"][1] = seq
    outer["config"]["name"] = "nested"
    return outer


def flat_outer():
    m = Model("outer")
    x = inp(m, [784], "pixels")
    h = m.add("Dense", "features", {}, [x], [None, 32])
    dense(m, h, 10, "scores", "softmax")
    return m


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    files = {
        "resnet20_tfkeras2.json": tfkeras2(resnet20()),
        "resnet20_keras3.json": keras3(resnet20()),
        "branches_keras3.json": keras3(branches()),
        "branches_tfkeras2.json": tfkeras2(branches()),
        "concat_add_tfkeras2.json": tfkeras2(concat_add()),
        "depthwise_branches_keras3.json": keras3(depthwise_branches()),
        "depthwise_branches_tfkeras2.json": tfkeras2(depthwise_branches()),
        "shared_layer_keras3.json": keras3(shared()),
        "two_inputs_tfkeras2.json": tfkeras2(two_inputs()),
        "rows_input_keras3.json": keras3(rows_input()),
        "nested_model_keras3.json": nested(),
    }
    for name, v in files.items():
        with open(os.path.join(out, name), "w") as f:
            # ResNet-20 on one line, as to_json() writes it by default;
            # the small ones as to_json(indent=2), for reading.
            json.dump(v, f, indent=None if name.startswith("resnet20") else 2)
            f.write("\n")
        print("wrote", name)


if __name__ == "__main__":
    main()

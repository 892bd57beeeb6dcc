// ort_predict.js MODEL_ONNX INPUTS_BIN SHAPE OUT_BIN [MODEL_ONNX ...]:
// runs an ONNX model in onnxruntime-web (WebAssembly, in Node.js) on the
// float32 inputs of SHAPE (a JSON list, N first) fed as "input", writes
// "output" as float32 to OUT_BIN and its dims on stdout; each further group
// of four arguments is another model, in the same process (starting the
// runtime once is most of a test's time). Run by nn/onnx's tests on models
// meshtrain wrote.
const ort = require('onnxruntime-web');
const fs = require('fs');

(async () => {
  ort.env.wasm.numThreads = 1;
  const args = process.argv.slice(2);
  if (args.length === 0 || args.length % 4 !== 0) throw new Error('want groups of MODEL_ONNX INPUTS_BIN SHAPE OUT_BIN');
  for (let i = 0; i < args.length; i += 4) {
    const [modelPath, inputsPath, shapeJSON, outPath] = args.slice(i, i + 4);
    const session = await ort.InferenceSession.create(fs.readFileSync(modelPath));
    const b = fs.readFileSync(inputsPath);
    const x = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
    const result = await session.run({input: new ort.Tensor('float32', x, JSON.parse(shapeJSON))});
    const y = result.output;
    fs.writeFileSync(outPath, Buffer.from(new Float32Array(y.data).buffer));
    console.log(JSON.stringify(y.dims));
  }
})().catch((e) => { console.error(e); process.exit(1); });

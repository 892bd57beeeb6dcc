// ort_predict.js MODEL_ONNX INPUTS_BIN SHAPE OUT_BIN: runs an ONNX model
// in onnxruntime-web (WebAssembly, in Node.js) on the float32 inputs of
// SHAPE (a JSON list, N first) fed as "input", writes "output" as
// float32 to OUT_BIN and its dims on stdout. Run by nn/onnx's tests on
// models meshtrain wrote.
const ort = require('onnxruntime-web');
const fs = require('fs');

(async () => {
  ort.env.wasm.numThreads = 1;
  const [modelPath, inputsPath, shapeJSON, outPath] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(fs.readFileSync(modelPath));
  const b = fs.readFileSync(inputsPath);
  const x = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
  const result = await session.run({input: new ort.Tensor('float32', x, JSON.parse(shapeJSON))});
  const y = result.output;
  fs.writeFileSync(outPath, Buffer.from(new Float32Array(y.data).buffer));
  console.log(JSON.stringify(y.dims));
})().catch((e) => { console.error(e); process.exit(1); });
